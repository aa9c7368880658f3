"""What ``validate`` returns: findings, and the report that decides whether the query is ok."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.results import Result, fields_json
from ckpt_cli.validate.codes import ERROR, SEVERITY_RANK


@dataclass
class Finding:
    code: str
    severity: str
    message: str
    paths: list[str] = field(default_factory=list)
    hint: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**fields_json(self, "code severity paths message hint"), **self.details}


@dataclass
class ValidationReport(Result):
    checkpoint: str
    target: dict[str, Any]
    findings: list[Finding]
    stats: dict[str, Any]
    # The severity at or above which a finding makes the report not ok (``--fail-on``).
    fail_on: str = ERROR

    @property
    def ok(self) -> bool:
        return not self.at_or_above(self.fail_on)

    def at_or_above(self, severity: str) -> list[Finding]:
        rank = SEVERITY_RANK[severity]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= rank]

    def body_json(self) -> dict[str, Any]:
        counts = {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITY_RANK}
        return fields_json(self, "ok checkpoint target counts findings stats", counts=counts)
