"""The safety checks of every change to a checkpoint (cleanup, repair, repartition): a minimum
age below the default, an active query (``core.activity``), files younger than the minimum
age, symbolic links."""

from __future__ import annotations

from collections.abc import Iterable

from ckpt_cli.core.activity import DEFAULT_MIN_AGE_SECONDS, Activity, query_activity
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.unfinished import (
    find_unfinished_conversion,
    find_unfinished_repartition,
    other_provider_stores,
)
from ckpt_cli.errors import CkptError, SafetyCheckError
from ckpt_cli.units import format_duration

MIN_AGE_RISK = (
    "files younger than that may belong to a batch the query is still writing or to an upload "
    "in progress (RocksDB uploads SST files before the zip that names them), and removing them "
    "can break the next restart"
)


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


def last_committed_batch(
    ckpt: Checkpoint, refused: type[CkptError], verb: str
) -> tuple[int, int | None]:
    """The last committed batch N a change that writes batch N+1 starts from, and the newest
    batch with an offsets entry; ``refused`` (naming ``verb``) when there is none. A damaged
    log is repaired first: it must read (its error names the file)."""
    _ = ckpt.query_id, ckpt.latest_offsets, ckpt.latest_commit
    batches = ckpt.batches
    last = batches.latest_committed
    if last is None or last not in batches.offsets:
        raise refused(
            f"{ckpt.storage.url}: no committed batch with its offsets entry: nothing to "
            f"{verb} (Spark needs one committed batch too)"
        )
    return last, batches.latest_offsets


def last_batch_committed(
    ckpt: Checkpoint, refused: type[CkptError], verb: str, *, unfinished: str, undo: str
) -> int:
    """The last committed batch, as :func:`last_committed_batch`; ``refused`` when a newer
    batch is not committed (``unfinished``: what it may be, beside a batch Spark re-runs;
    ``undo``: the hint's command that rolls back an unfinished change of this kind)."""
    last, latest = last_committed_batch(ckpt, refused, verb)
    conversion = find_unfinished_conversion(ckpt)
    if conversion is not None:
        raise refused(
            f"{ckpt.storage.url}: {conversion.describe()}",
            hint="ckpt convert CHECKPOINT --undo rolls it back",
        )
    repartition = find_unfinished_repartition(ckpt)
    if repartition is not None:
        raise refused(f"{ckpt.storage.url}: {repartition.describe()}", hint=repartition.hint)
    # Before the uncommitted batch: a format conversion pins nothing in the offsets.
    stores = other_provider_stores(ckpt)
    if stores:
        raise refused(
            f"{stores[0]}: files of another state store provider or checkpoint format than "
            "the checkpoint's: an interrupted conversion",
            hint="ckpt convert CHECKPOINT --undo rolls it back",
        )
    if latest is not None and latest > last:
        raise refused(
            f"{ckpt.storage.url}: the last batch ({latest}) is not committed: {unfinished}, "
            "or a batch Spark re-runs at restart",
            hint=f"{undo}; else restart the query until the batch commits, or "
            f"ckpt repair --rollback-to {last}",
        )
    return last
