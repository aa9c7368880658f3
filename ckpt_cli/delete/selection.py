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


# A removed record's row, or what makes it (built only when it is kept or handed on).
RowOf = dict[str, Any] | Callable[[], dict[str, Any]]


@dataclass
class PartitionMatch:
    """What a deletion removes from one partition: ``keys`` in the state before, ``matched``
    of them, ``size``: bytes of the removed records; the removed raw keys per store; the
    removed records' rows (for the audit file and the sample): handed to ``sink`` as they
    come when there is one (this process), else kept, the first ``keep`` of them (None:
    all). Plain data without a sink: an engine's task returns it."""

    partition: int
    keys: int = 0
    matched: int = 0
    size: int = 0
    removals: dict[str, list[bytes]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    keep: int | None = None
    sink: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False, compare=False)

    def remove(self, store: str, raw_key: bytes, raw_value: bytes, row: RowOf) -> None:
        self.removals.setdefault(store, []).append(raw_key)
        self.size += len(raw_key) + len(raw_value)
        if self.sink is not None:
            self.sink(row() if callable(row) else row)
        elif self.keep is None or len(self.rows) < self.keep:
            self.rows.append(row() if callable(row) else row)
