"""Spark 4.0's ``v2`` RocksDB zip metadata: whether a restart on Spark 4.1+ loads it.

Spark 4.0 writes a zip's ``metadata`` entry as ``v`` + the checkpoint format version, so
``v2`` in checkpoint format v2 (``RocksDBCheckpointMetadata.VERSION``); 4.1.4-4.3.0 accept
only ``v1`` (``readFromFile``: CANNOT_LOAD_STATE_STORE.CANNOT_READ_CHECKPOINT, "Expected v1,
but found v2"). Which zip a restart at version V loads, in format v2
(``RocksDB.loadWithCheckpointId``):

* ``<V>_<id>.zip`` when it exists, else the newest zip on the lineage of
  ``<V>_<id>.changelog``, else (a lineage from version 1) the empty store. This is
  :func:`ckpt_cli.core.rebuild.plan_version`'s base, and all a 4.1 restart tries.
* Spark 4.2 and 4.3 (``AutoSnapshotLoader``, ``spark.sql.streaming.stateStore.
  autoSnapshotRepair.*``, on by default, only with changelog checkpointing) try that zip
  once; when it fails they walk the changelog lineage back from V to ``max(1, V - 500)``
  (``getFullLineage``; on failure they keep the lineage they had), then try each older zip
  on it and finally version 0, newest first, within ``maxChangeFileReplay`` (500) versions
  of V, each only if the lineage names every version after it. The first that loads is
  kept and the changelogs after it are replayed (a missing one then fails the query).

So a Spark 4.0 checkpoint upgrades to 4.2+ when every changelog from version 1 to V is
retained (and V <= 500), or when the restart loads no ``v2`` zip at all; to 4.1 only in the
second case. Verified with real restarts: ``fixtures/probe_v2_upgrade.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ckpt_cli.core.model import CheckpointFile, FileKind
from ckpt_cli.core.read import read_zip_metadata
from ckpt_cli.core.rebuild import (
    ReplayPlan,
    StateUnavailable,
    change_files,
    read_changelog_header,
)
from ckpt_cli.errors import CkptError
from ckpt_cli.validate.codes import INFO, WARNING, ZIP_METADATA_V2
from ckpt_cli.validate.context import ValidationRun

# spark.sql.streaming.stateStore.autoSnapshotRepair.maxChangeFileReplay, default of 4.2.1
# and 4.3.0 (SQLConf).
MAX_CHANGE_FILE_REPLAY = 500


@dataclass(frozen=True)
class Repair:
    """What Spark 4.2+'s auto snapshot repair does with a partition whose zip fails."""

    base: int | None  # the version it rebuilds from (0: the empty store); None: it fails
    why: str  # how it rebuilds, or why it cannot


def zip_version(run: ValidationRun, f: CheckpointFile) -> int | None:
    """The metadata version of a zip (None: unreadable, which Spark cannot load either)."""
    meta = run.zip_metadata.get(f.path)
    if meta is None:
        try:
            meta = read_zip_metadata(run.ckpt.storage, f.path, f.entry.size)
        except CkptError:
            return None
        run.zip_metadata[f.path] = meta
    return meta.version


def auto_snapshot_repair(
    run: ValidationRun, plan: ReplayPlan, version_of: Callable[[CheckpointFile], int | None]
) -> Repair:
    """Spark 4.2/4.3's retry after ``plan.base`` failed to load (``RocksDB$$anon$2``, the
    format-v2 ``AutoSnapshotLoader``), as far as the checkpoint's files decide it."""
    ckpt = run.ckpt
    part = ckpt.operators[plan.operator].stores[plan.store].partitions[plan.partition]
    v, uid = plan.version, plan.unique_id
    assert plan.base is not None and plan.base.version is not None
    files = {(f.kind, f.version, f.unique_id): f for f in part.files if f.version is not None}
    own = files.get((FileKind.CHANGELOG, v, uid))
    if own is None:
        return Repair(
            None,
            f"there is no changelog of version {v}, and without changelog checkpointing "
            "Spark has no auto snapshot repair",
        )
    start = max(1, v - MAX_CHANGE_FILE_REPLAY)
    walk_error = None
    lineage: dict[int, str | None] = {}
    try:
        for f in change_files(ckpt, plan.operator, plan.partition, start, v, store=plan.store):
            if f.version is not None:
                lineage[f.version] = f.unique_id
    except StateUnavailable as exc:
        # Spark keeps the lineage it loaded with: the zip's version alone, or the lineage
        # line of the version's changelog.
        walk_error = exc.message
        if (FileKind.ZIP, v, uid) in files:
            lineage = {v: uid}
        else:
            header = read_changelog_header(ckpt, own).lineage or ()
            lineage = {e.version: e.unique_id for e in header}
            lineage[v] = uid
    tried = plan.base.version
    candidates = sorted(
        {w for w, u in lineage.items() if w != tried and (FileKind.ZIP, w, u) in files} | {0},
        reverse=True,
    )
    for base in (w for w in candidates if v - w <= MAX_CHANGE_FILE_REPLAY):
        if any(w not in lineage for w in range(base + 1, v + 1)):
            continue  # "lineage is incomplete": the next candidate
        if base and version_of(files[(FileKind.ZIP, base, lineage[base])]) != 1:
            continue  # another zip Spark 4.2+ cannot read
        missing = [
            w for w in range(base + 1, v + 1) if (FileKind.CHANGELOG, w, lineage[w]) not in files
        ]
        if missing:
            return Repair(
                None,
                f"it would rebuild from version {base} and fails replaying: the changelog of "
                f"version {missing[0]} is missing",
            )
        start_from = "the empty store" if base == 0 else f"the v1 zip of version {base}"
        return Repair(base, f"rebuilds it from {start_from} and changelogs {base + 1}-{v}")
    if v > MAX_CHANGE_FILE_REPLAY:
        return Repair(
            None,
            f"version {v} is more than {MAX_CHANGE_FILE_REPLAY} versions (its "
            "autoSnapshotRepair.maxChangeFileReplay) past the empty store, and no zip within "
            "them has v1 metadata",
        )
    oldest = min(
        (f.version for f in part.files if f.kind is FileKind.CHANGELOG and f.version is not None),
        default=v,
    )
    if oldest > 1:
        return Repair(None, f"it needs changelogs 1-{v}, and they go back only to version {oldest}")
    return Repair(None, f"it needs changelogs 1-{v} on the lineage of version {v}: {walk_error}")


def check_zip_metadata_v2(run: ValidationRun) -> None:
    """ZIP_METADATA_V2: which Spark versions restart a checkpoint whose restart loads, or
    whose decoded files hold, zips of metadata v2."""
    v2_zips = sorted(p for p, m in run.zip_metadata.items() if m.version == 2)
    loaded: list[tuple[ReplayPlan, Repair]] = []
    for plan in run.restart_plans:
        base = plan.base
        if base is None or base.kind is not FileKind.ZIP or base.unique_id is None:
            continue
        if zip_version(run, base) == 2:
            loaded.append((plan, auto_snapshot_repair(run, plan, lambda f: zip_version(run, f))))
    target = run.target_version()
    if loaded:
        _report_loaded(run, loaded, target)
    elif v2_zips and target:
        run.add(
            ZIP_METADATA_V2,
            f"{_paths(v2_zips, 'zip')}: RocksDB checkpoint metadata v2, as Spark 4.0 writes it "
            f"in checkpoint format v2; a restart at version {target} loads none of them, so "
            "Spark 4.1 and later restart this query",
            v2_zips,
            severity=INFO,
            hint=f"a restart is not affected; {_LEFT_BEHIND}",
            upgrade={"4.1": "restarts", "4.2+": "restarts"},
            restart_version=target,
        )


def _report_loaded(
    run: ValidationRun, loaded: list[tuple[ReplayPlan, Repair]], target: int | None
) -> None:
    stuck = [(p, r) for p, r in loaded if r.base is None]
    zips = sorted(p.base.path for p, _ in loaded if p.base is not None)
    head = (
        f"{_paths(zips, 'zip')}: a restart at version {target} loads "
        f"{'this zip' if len(zips) == 1 else 'these zips'}, written by Spark 4.0 with "
        "RocksDB checkpoint metadata v2"
    )
    if stuck:
        plan, repair = stuck[0]
        run.add(
            ZIP_METADATA_V2,
            f"{head}; Spark 4.1 and later read only v1 and fail (CANNOT_LOAD_STATE_STORE."
            'CANNOT_READ_CHECKPOINT: "Expected v1, but found v2"), and the auto snapshot '
            f"repair of 4.2 and later cannot rebuild {plan.path}{_more(stuck)} without it: "
            f"{repair.why}",
            zips,
            severity=WARNING,
            hint="Spark 4.0 restarts this query; 4.1 and later fail on it until these zips "
            f"have v1 metadata: {_CONVERT}",
            upgrade={"4.1": "fails", "4.2+": "fails"},
            restart_version=target,
        )
        return
    plan, repair = loaded[0]
    run.add(
        ZIP_METADATA_V2,
        f"{head}; Spark 4.1 reads only v1 and fails (CANNOT_LOAD_STATE_STORE."
        "CANNOT_READ_CHECKPOINT); 4.2 and later fail on it too, but their auto snapshot repair "
        f"(on by default with changelog checkpointing) {repair.why} in {plan.path}"
        f"{_more(loaded)}, and restarts the query",
        zips,
        severity=WARNING,
        hint=f"upgrade to Spark 4.2 or later, not 4.1, while changelogs {(repair.base or 0) + 1}-"
        f"{target} are retained (Spark 4.0's maintenance and ckpt cleanup delete old ones: "
        f"validate again just before); Spark 4.0 restarts it as it is. After an upgrade the "
        f"v2 zips stay, and {_LEFT_BEHIND}; or {_CONVERT}",
        upgrade={"4.1": "fails", "4.2+": "restarts"},
        restart_version=target,
    )


# What the v2 zips an upgraded query leaves behind do (Spark 4.2.1 and 4.3.0, seen): its
# maintenance (RocksDBFileManager.deleteOldVersions) reads every zip, fails on them, logs
# "Ignoring error while performing cleanup maintenance" and deletes nothing.
_CONVERT = (
    "`ckpt convert CKPT --format-version 2 --apply` rewrites the state as zips with v1 "
    "metadata for Spark 4.1+ (`--format-version 1`: for Spark 4.0 too, set to format v1)"
)
_LEFT_BEHIND = (
    "Spark 4.1 and later fail wherever they read a v2 zip: the maintenance of 4.2 and 4.3 "
    "reads every zip, so it deletes no old state file while one is there; ckpt cleanup "
    "removes them once no retained batch needs them"
)


def _paths(paths: list[str], what: str) -> str:
    n = len(paths) - 1
    return paths[0] + (f" and {n} more {what}{'s' if n > 1 else ''}" if n else "")


def _more(partitions: list[tuple[ReplayPlan, Repair]]) -> str:
    n = len(partitions) - 1
    return f" (and {n} more partition{'s' if n > 1 else ''})" if n else ""
