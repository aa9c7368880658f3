"""How a deletion chooses keys (:class:`Selection`) and what it found (:class:`KeyMatch`),
for the operators whose key spans several stores or column families (joins,
transformWithState)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.progress import ProgressSink


@dataclass(frozen=True)
class Selection:
    """How keys are chosen: ``test`` of a row (only its ``key`` when ``keys_only``);
    ``emit`` gets each removed record's row; ``progress``, per partition."""

    test: Callable[[dict[str, Any]], bool]
    keys_only: bool
    emit: Callable[[dict[str, Any]], None]
    progress: ProgressSink

    def matches(self, row: dict[str, Any]) -> bool:
        return self.test(
            {"partition_id": row["partition_id"], "key": row["key"]} if self.keys_only else row
        )


@dataclass
class KeyMatch:
    """Per partition: ``(keys, matched keys, bytes of the removed records)``; the removed
    raw keys per ``(store, partition)``."""

    counts: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    removals: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
