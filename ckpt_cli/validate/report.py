"""What ``validate`` returns: findings, and the report that decides whether the query is ok."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
        return {
            "code": self.code,
            "severity": self.severity,
            "paths": self.paths,
            "message": self.message,
            "hint": self.hint,
            **self.details,
        }


@dataclass
class ValidationReport:
    checkpoint: str
    target: dict[str, Any]
    findings: list[Finding]
    stats: dict[str, Any]
    # The severity at or above which a finding makes the report not ok (``--fail-on``).
    fail_on: str = ERROR

    @property
    def ok(self) -> bool:
        return not self.at_or_above(self.fail_on)

    @property
    def status(self) -> str:
        """``"ok"`` or ``"problems"``, as the JSON output's top-level ``"status"``."""
        return "ok" if self.ok else "problems"

    def at_or_above(self, severity: str) -> list[Finding]:
        rank = SEVERITY_RANK[severity]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= rank]

    def to_json(self, fail_on: str | None = None) -> dict[str, Any]:
        """The report as JSON (``fail_on`` overrides the report's own for ``"ok"``)."""
        counts = {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITY_RANK}
        return {
            "ok": not self.at_or_above(fail_on or self.fail_on),
            "checkpoint": self.checkpoint,
            "target": self.target,
            "counts": counts,
            "findings": [f.to_json() for f in self.findings],
            "stats": self.stats,
        }
