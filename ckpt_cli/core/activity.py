"""Whether the query on a checkpoint is running, from two signals of its newest batch: when
``offsets/`` was last written (the listing's modification times) and when the batch was
planned (its ``batchTimestampMs``, Spark's trigger clock when it planned the batch). A running
query writes ``offsets/<batch>`` as it plans the batch, so both are young; a copy, a restore or
a download gives old batches new file times, so only the first is. The query looks active
when every signal that can be read is younger than ``min_age``.

A repartition (Spark's own, or ``ckpt repartition``) writes ``offsets/N+1`` with batch N's
``batchTimestampMs`` and commits it last: while that batch is not committed, its writer may
still be running, and its batch time says nothing of when it was written, so the file time
alone decides.

``ckpt versions`` shows it as the last activity; the change engine refuses to change a
checkpoint whose query looks active (``change.safety``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.errors import FormatError
from ckpt_cli.results import fields_json
from ckpt_cli.units import ago, format_duration, iso_ms, seconds_since

# Files and batches younger than this may belong to a query still running (an hour).
DEFAULT_MIN_AGE_SECONDS = 3600.0


@dataclass(frozen=True)
class Activity:
    """How recently the query ran, and whether it looks active against ``min_age``
    (:func:`query_activity`). Ages are seconds before ``now``, negative for a time after it
    (the clock of the machine that ran Spark ahead of this one's): such a time counts as young."""

    min_age: float
    batch: int | None  # the newest offsets entry's batch
    # Its batchTimestampMs; None when unreadable, or 0 (continuous processing writes no
    # batch metadata).
    planned_ms: int | None
    planned_age: float | None
    # The newest offsets/ file's modification time; None when the store gives none.
    written_ms: int | None
    written_age: float | None
    active: bool
    # The batch whose batchTimestampMs the newest entry, not committed, repeats (a
    # repartition's batch): its batch time then does not count.
    copied_from: int | None = None

    @property
    def planned_counts(self) -> bool:
        return self.planned_age is not None and self.copied_from is None

    @property
    def planned_young(self) -> bool:
        return (
            self.planned_counts and self.planned_age is not None and self.planned_age < self.min_age
        )

    @property
    def written_young(self) -> bool:
        return self.written_age is not None and self.written_age < self.min_age

    @property
    def signals(self) -> list[str]:
        """The signals younger than ``min_age``: ``planned`` (the batch's batchTimestampMs),
        ``written`` (offsets/'s modification time)."""
        young = (("planned", self.planned_young), ("written", self.written_young))
        return [name for name, is_young in young if is_young]

    def evidence(self) -> str:
        """What each signal says, in words."""
        parts = []
        if self.planned_age is not None:
            parts.append(f"the last batch ({self.batch}) was planned {ago(self.planned_age)}")
        if self.written_age is not None:
            parts.append(f"offsets/ was last written {ago(self.written_age)}")
        if self.batch is None:
            parts.append("no batch was planned")
        elif self.copied_from is not None:
            parts.append(
                f"batch {self.batch}, not committed, repeats batch {self.copied_from}'s "
                "batchTimestampMs (a repartition, which may still be running)"
            )
        elif self.planned_age is None:
            parts.append(f"batch {self.batch}'s batchTimestampMs cannot be read")
        if self.written_age is None:
            parts.append("the store gives no modification times")
        return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]

    @property
    def note(self) -> str | None:
        """When one signal is young and the other not: why the query is not judged active."""
        if self.written_age is None or self.planned_age is None or not self.planned_counts:
            return None
        if self.written_young and not self.planned_young:
            return (
                f"offsets/ was last written {ago(self.written_age)} but the last batch "
                f"({self.batch}) was planned {ago(self.planned_age)} (a copy or restore?): "
                "the query is not judged active"
            )
        if self.planned_young and not self.written_young:
            return (
                f"the last batch ({self.batch}) was planned {ago(self.planned_age)} but "
                f"offsets/ was last written {ago(self.written_age)} (a copy that kept "
                "modification times, or the clock of Spark's machine ahead of this one's?): "
                "the query is not judged active"
            )
        return None

    def refusal(self) -> str:
        """Why the query looks active."""
        under = "both under" if len(self.signals) == 2 else "under"
        return (
            f"the query looks active ({self.evidence()}, {under} "
            f"min_age={format_duration(self.min_age)})"
        )

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "active signals min_age_seconds=min_age batch planned planned_ms"
            " planned_age_seconds=planned_age written written_ms written_age_seconds=written_age"
            " copied_from note",
            planned=iso_ms(self.planned_ms),
            written=iso_ms(self.written_ms),
        )


def query_activity(
    ckpt: Checkpoint, *, min_age: float = DEFAULT_MIN_AGE_SECONDS, now: float | None = None
) -> Activity:
    """Whether the query on ``ckpt`` looks active: every signal that can be read (the newest
    offsets entry's batchTimestampMs, offsets/'s newest modification time) is younger than
    ``min_age``. What every command that changes a checkpoint checks, and what ``ckpt
    versions`` shows as the last activity."""
    now = time.time() if now is None else now
    mtimes = [f.entry.mtime for f in ckpt.of_kind(FileKind.OFFSETS) if f.entry.mtime is not None]
    written = round(max(mtimes) * 1000) if mtimes else None
    batch = ckpt.batches.latest_offsets
    planned = _planned(ckpt, batch)
    copied_from = None
    if batch is not None and batch not in ckpt.batches.commits and planned is not None:
        # Not committed: a repartition's batch repeats the time of the batch before it.
        copied_from = batch - 1 if _planned(ckpt, batch - 1) == planned else None
    planned_age = seconds_since(planned, now) if planned is not None else None
    written_age = seconds_since(written, now) if written is not None else None
    counted = planned_age if copied_from is None else None
    known = [age for age in (counted, written_age) if age is not None]
    active = bool(known) and all(age < min_age for age in known)
    return Activity(min_age, batch, planned, planned_age, written, written_age, active, copied_from)


def _planned(ckpt: Checkpoint, batch: int | None) -> int | None:
    """``offsets/<batch>``'s batchTimestampMs; None when there is no such entry, it cannot be
    read (validate reports it), or it is 0 (continuous processing writes no batch metadata)."""
    if batch is None or batch not in ckpt.batches.offsets:
        return None
    try:
        stamp = ckpt.offsets(batch).batch_timestamp_ms
    except FormatError:
        return None
    return stamp if stamp > 0 else None
