"""The safety checks of every destructive operation (cleanup, repair, repartition): a minimum
age below the default, an active query, files younger than the minimum age, symbolic links."""

from __future__ import annotations

from collections.abc import Iterable

from ckpt_cli.errors import SafetyCheckError
from ckpt_cli.model import Checkpoint, FileKind

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
            f"min_age={format_duration(min_age)} is below the default "
            f"{format_duration(DEFAULT_MIN_AGE_SECONDS)}: {MIN_AGE_RISK}",
            hint="pass force=True if you are sure no query is running on this checkpoint",
        )


def newest_offsets_age(ckpt: Checkpoint, now: float) -> float | None:
    """Seconds since the newest offsets entry was written: how ckpt judges a query active."""
    mtimes = [f.entry.mtime for f in ckpt.of_kind(FileKind.OFFSETS) if f.entry.mtime is not None]
    return round(now - max(mtimes), 3) if mtimes else None


def check_not_active(ckpt: Checkpoint, *, min_age: float, now: float, force: bool) -> None:
    """Refuse (unless ``force``) when the newest offsets entry is younger than ``min_age``."""
    age = newest_offsets_age(ckpt, now)
    if age is not None and age < min_age and not force:
        raise SafetyCheckError(
            f"{ckpt.storage.url}: the query looks active (newest offsets entry written "
            f"{age:.0f} s ago, under min_age={format_duration(min_age)}); not changing it",
            hint="stop the query first, or pass force=True if you know it is stopped",
        )


def check_stopped(ckpt: Checkpoint, *, min_age: float, now: float, force: bool) -> None:
    """What every command that changes a checkpoint checks first: a ``min_age`` below the
    default needs ``force`` (else ``min_age=0`` would switch the activity check off), and an
    active query is refused unless ``force``."""
    check_min_age(min_age, force=force)
    check_not_active(ckpt, min_age=min_age, now=now, force=force)


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
            raise SafetyCheckError(
                f"{path}: modified {max(0.0, now - entry.mtime):.0f} s ago, under min_age="
                f"{format_duration(min_age)}; not touching it ({MIN_AGE_RISK})",
                hint="wait until it is older, or pass force=True if you know no query is running",
            )
