"""How a deletion chooses keys (:class:`Selection`) and what it found in one store partition
(:class:`PartitionMatch`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Selection:
    """How keys are chosen: ``test`` of a row (only its ``key`` when ``keys_only``)."""

    test: Callable[[dict[str, Any]], bool]
    keys_only: bool

    def matches(self, row: dict[str, Any]) -> bool:
        return self.test(
            {"partition_id": row["partition_id"], "key": row["key"]} if self.keys_only else row
        )


@dataclass
class PartitionMatch:
    """What a deletion removes from one partition: ``keys`` in the state before, ``matched``
    of them, ``size``: bytes of the removed records; the removed raw keys per store; the removed
    records' rows (for the audit file and the sample). Plain data: an engine's task returns
    it."""

    partition: int
    keys: int = 0
    matched: int = 0
    size: int = 0
    removals: dict[str, list[bytes]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def remove(self, store: str, raw_key: bytes, raw_value: bytes, row: dict[str, Any]) -> None:
        self.removals.setdefault(store, []).append(raw_key)
        self.size += len(raw_key) + len(raw_value)
        self.rows.append(row)
