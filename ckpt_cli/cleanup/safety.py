"""The safety checks of every destructive operation (cleanup, repair, repartition): a minimum
age below the default, an active query, files younger than the minimum age, symbolic links.

Whether the query is active is judged from two signals of its newest batch: when ``offsets/``
was last written (the listing's modification times) and when the batch was planned (its
``batchTimestampMs``, Spark's trigger clock when it planned the batch). A running query writes
``offsets/<batch>`` as it plans the batch, so both are young; a copy, a restore or a download
gives old batches new file times, so only the first is. The query looks active when every
signal that can be read is younger than ``min_age``.

A repartition (Spark's own, or ``ckpt repartition``) writes ``offsets/N+1`` with batch N's
``batchTimestampMs`` and commits it last: while that batch is not committed, its writer may
still be running, and its batch time says nothing of when it was written, so the file time
alone decides.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ckpt_cli.errors import FormatError, SafetyCheckError
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.units import ago, iso_ms, seconds_since

DEFAULT_MIN_AGE_SECONDS = 3600.0
MIN_AGE_RISK = (
    "files younger than that may belong to a batch the query is still writing or to an upload "
    "in progress (RocksDB uploads SST files before the zip that names them), and removing them "
    "can break the next restart"
)


def format_duration(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def check_min_age(min_age: float, *, force: bool) -> None:
    """Like Delta's VACUUM retention check: a ``min_age`` below the default needs ``force``."""
    if min_age < DEFAULT_MIN_AGE_SECONDS and not force:
        raise SafetyCheckError(
            f"{_low_min_age(min_age)}: {MIN_AGE_RISK}",
            hint="pass force=True if you are sure no query is running on this checkpoint",
        )


def _low_min_age(min_age: float) -> str:
    return (
        f"min_age={format_duration(min_age)} is below the default "
        f"{format_duration(DEFAULT_MIN_AGE_SECONDS)}"
    )


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
        return {
            "active": self.active,
            "signals": self.signals,
            "min_age_seconds": self.min_age,
            "batch": self.batch,
            "planned": iso_ms(self.planned_ms),
            "planned_ms": self.planned_ms,
            "planned_age_seconds": self.planned_age,
            "written": iso_ms(self.written_ms),
            "written_ms": self.written_ms,
            "written_age_seconds": self.written_age,
            "copied_from": self.copied_from,
            "note": self.note,
        }


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


def check_not_active(
    ckpt: Checkpoint, *, min_age: float, now: float | None = None, force: bool
) -> Activity:
    """Refuse (unless ``force``) when the query looks active (:func:`query_activity`)."""
    activity = query_activity(ckpt, min_age=min_age, now=now)
    if activity.active and not force:
        raise SafetyCheckError(
            f"{ckpt.storage.url}: {activity.refusal()}; not changing it",
            hint="stop the query first, or pass force=True if you know it is stopped",
        )
    return activity


def check_stopped(
    ckpt: Checkpoint, *, min_age: float, now: float | None = None, force: bool
) -> Activity:
    """What every command that changes a checkpoint checks first: a ``min_age`` below the
    default needs ``force`` (else ``min_age=0`` would switch the activity check off), and an
    active query is refused unless ``force``."""
    check_min_age(min_age, force=force)
    return check_not_active(ckpt, min_age=min_age, now=now, force=force)


def plan_warnings(activity: Activity, *, force: bool | None) -> list[str]:
    """What a plan says instead of refusing (a dry run never refuses): for a plan meant to be
    applied (``force`` given), a ``min_age`` below the default and an active query, which
    applying refuses unless ``force``; for a report (``force`` None), an active query; for
    both, signals that disagree (a copy or restore)."""
    out = []
    if force is False and activity.min_age < DEFAULT_MIN_AGE_SECONDS:
        out.append(f"{_low_min_age(activity.min_age)}: applying needs force=True")
    if activity.active:
        then = {
            None: "",
            False: ": applying refuses unless force=True",
            True: ": going ahead with force=True",
        }
        out.append(activity.refusal() + then[force])
    if activity.note:
        out.append(activity.note)
    return out


def links_refused(ckpt: Checkpoint) -> list[str]:
    """One line per symbolic link, for the commands that rewrite a checkpoint and refuse
    links (``repair``, ``repartition``): nothing is listed through them, so what those
    commands would plan there may be wrong, and nothing is ever written through one."""
    return [
        f"{rel} is a symbolic link (to {target}); ckpt does not follow or change links: "
        "replace it with what it points to"
        for rel, target in ckpt.listing.symlinks.items()
    ]


def check_old_enough(
    ckpt: Checkpoint, paths: Iterable[str], *, min_age: float, now: float, force: bool
) -> None:
    """Refuse (unless ``force``) to touch a file modified less than ``min_age`` ago."""
    if force:
        return
    cutoff = now - min_age
    for path in paths:
        entry = ckpt.listing.get(path)
        if entry is not None and entry.mtime is not None and entry.mtime > cutoff:
            hint = "wait until it is older, or pass force=True if you know no query is running"
            note = query_activity(ckpt, min_age=min_age, now=now).note
            if note:
                # A copy's files are all new: their times cannot tell a write in progress.
                hint = f"{note}; every file of a copy is new: {hint}"
            raise SafetyCheckError(
                f"{path}: modified {max(0.0, now - entry.mtime):.0f} s ago, under min_age="
                f"{format_duration(min_age)}; not touching it ({MIN_AGE_RISK})",
                hint=hint,
            )
