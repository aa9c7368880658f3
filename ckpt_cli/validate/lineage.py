"""Checkpoint format v2: each changelog's lineage line against the commit log's uniqueIds.

A restart loads ``<v>_<id>.zip`` when it exists and never reads the lineage; a load from an
older snapshot, a rollback and the change feed follow it (``RocksDB.loadWithCheckpointId``,
``getFullLineage``), so a lineage naming the wrong attempt breaks those.
"""

from __future__ import annotations

from ckpt_cli.core.model import CheckpointFile, FileKind, Partition
from ckpt_cli.core.rebuild import ReplayPlan, version_unique_id
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.validate.codes import LINEAGE_MISMATCH
from ckpt_cli.validate.context import ValidationRun


def check_plan_lineage(run: ValidationRun, plan: ReplayPlan) -> None:
    """Format v2: each changelog's lineage names the ids the commit log recorded."""
    for step in plan.steps:
        check_changelog_lineage(run, plan.operator, plan.store, plan.partition, step)


def check_retained_changelogs(run: ValidationRun, op: int, store: str, part: Partition) -> None:
    """Every retained format-v2 changelog: a rollback, a replay from an older snapshot or
    the change feed follows its lineage (as Spark does), even where a zip of the same
    version hides it from a restart. Files of attempts the commit log did not choose are
    orphans (Spark never reads them; ``check_orphans`` reports them)."""
    for f in part.files:
        if f.kind is not FileKind.CHANGELOG or f.unique_id is None or f.version is None:
            continue
        if run.unchosen(op, store, part.id, f) is None:
            check_changelog_lineage(run, op, store, part.id, f)


def check_changelog_lineage(
    run: ValidationRun, op: int, store: str, pid: int, f: CheckpointFile
) -> None:
    from ckpt_cli.core.rebuild import read_changelog_header

    assert f.version is not None
    if f.path in run.lineage_checked:
        return
    run.lineage_checked.add(f.path)
    try:
        lineage = read_changelog_header(run.ckpt, f).lineage or ()
    except FormatError:
        run.queue(f)  # decoding it reports what is wrong
        return
    part = run.ckpt.operators[op].stores[store].partitions[pid]
    for entry in lineage:
        w, named = entry.version, entry.unique_id
        if w >= f.version:
            continue
        sv = part.versions.get(w)
        carried = sv.unique_ids if sv else []
        recorded = _unique_id(run, op, store, pid, w)
        if recorded is not None and recorded != named:
            where = (
                f"{w}_{named} is a file of an attempt the commit log did not choose; Spark "
                "follows the lineage, so a load through it reads that attempt's state"
                if named in carried
                else "no file has that id; Spark follows the lineage, so a load of this "
                "version from an older snapshot, or a change feed through it, fails"
            )
            message = (
                f"{f.path}: lineage says version {w} is {named}, commits/{w - 1} says "
                f"{recorded}; {where}"
            )
            paths = [f.path, f"commits/{w - 1}"]
        elif recorded is None and carried and named not in carried:
            # The commit is purged, but the files of that version are still here.
            message = (
                f"{f.path}: lineage says version {w} is {named}, and no file of version {w} "
                f"has that id (they carry {', '.join(carried)}); Spark follows the lineage, "
                "so a load of this version from an older snapshot, or a change feed "
                "through it, fails"
            )
            paths = [f.path]
        else:
            continue
        run.add(
            LINEAGE_MISMATCH,
            message,
            paths,
            operator=op,
            store=store,
            partition=pid,
            version=f.version,
            lineage_version=w,
            lineage_unique_id=named,
            commit_unique_id=recorded,
        )


def _unique_id(run: ValidationRun, op: int, store: str, part: int, version: int) -> str | None:
    try:
        return version_unique_id(run.ckpt, op, store, part, version)
    except CkptError:
        return None  # an unreadable commit is reported by check_logs
