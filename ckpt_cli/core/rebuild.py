"""Which files rebuild the state of a store partition at a version, as Spark loads it.

* HDFS-backed store (docs §3.3): the newest ``.snapshot`` at or below the version (or the empty
  map at version 0), then every ``.delta`` after it, in order.
* RocksDB, checkpoint format v1 (§5.3): the newest ``.zip`` at or below the version, then
  every ``.changelog`` after it.
* RocksDB, checkpoint format v2 (§7): the version's ``uniqueId`` comes from the commit log;
  ``<v>_<id>.zip`` if present, else the lineage in ``<v>_<id>.changelog`` names the ancestors,
  the newest zip on that lineage is the base, and the lineage's changelogs are replayed.

The change feed reads one delta or changelog per batch (``change_files``), in format v2 along
the changelog lineage as Spark's ``readChangeFeed`` does.

Planning reads no state, only changelog headers (the lineage), so ``validate`` and
``cleanup`` use it to tell whether a version is recoverable; ``replay.read`` reads the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckpt_cli.core.model import (
    DEFAULT_STORE,
    Checkpoint,
    CheckpointFile,
    FileKind,
    Partition,
    Store,
)
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import compression, records

COMPRESSION_CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
# What to do when a version's state cannot be loaded or read: every such error says it.
REPAIR_HINT = (
    "ckpt validate names every problem; ckpt repair rolls the checkpoint back to the newest "
    "batch whose state loads (without --apply it shows the plan); replay --best-effort "
    "reads each partition's newest version that loads"
)


class StateUnavailable(CkptError, code="state-unavailable"):
    """The files needed to rebuild a version are not (all) in the checkpoint.

    ``reason`` says which way, in the words of ``ckpt validate``'s finding codes:
    ``MISSING_STATE_FILE``, ``MISSING_UNIQUE_ID_FILE``, ``LINEAGE_MISMATCH``,
    ``UNKNOWN_UNIQUE_ID``; ``paths`` are the files that should be there.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        reason: str = "MISSING_STATE_FILE",
        paths: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, hint=hint or REPAIR_HINT)
        self.reason = reason
        self.paths = paths


@dataclass
class ReplayPlan:
    """Which files rebuild ``version`` of one store partition, in the order they apply."""

    operator: int
    store: str
    partition: int
    path: str
    provider: str
    version: int
    # A snapshot or zip to start from; None means the empty state (version 0).
    base: CheckpointFile | None
    # Deltas or changelogs applied after the base, by ascending version.
    steps: list[CheckpointFile] = field(default_factory=list)
    # Format v2: the uniqueId of the version (from the commit log), else None.
    unique_id: str | None = None

    @property
    def files(self) -> list[CheckpointFile]:
        return ([self.base] if self.base else []) + self.steps


def _partition(
    ckpt: Checkpoint, operator: int, store: str, partition: int
) -> tuple[Store, Partition]:
    op = ckpt.operators.get(operator)
    if op is None:
        known = ", ".join(str(o) for o in ckpt.operators) or "none"
        raise CkptError(
            f"{ckpt.storage.url}: no state for operator {operator} (operators: {known})"
        )
    st = op.stores.get(store)
    if st is None:
        raise CkptError(f"state/{operator}: no store {store!r} (stores: {', '.join(op.stores)})")
    part = st.partitions.get(partition)
    if part is None:
        raise CkptError(
            f"state/{operator}: no partition {partition} in store {store!r} "
            f"(partitions 0-{max(st.partitions)})"
        )
    return st, part


def version_unique_id(
    ckpt: Checkpoint, operator: int, store: str, partition: int, version: int
) -> str | None:
    """The uniqueId Spark recorded for ``version`` in ``commits/<version-1>`` (format v2)."""
    batch = version - 1
    if batch not in ckpt.batches.commits:
        return None
    ids = (ckpt.commit(batch).state_unique_ids or {}).get(operator)
    if not ids or partition >= len(ids):
        return None
    stores = list(ckpt.operators[operator].stores)
    index = stores.index(store) if store in stores else 0
    row = ids[partition]
    return row[index] if index < len(row) else None


def plan_version(
    ckpt: Checkpoint,
    operator: int,
    partition: int,
    version: int,
    *,
    store: str = DEFAULT_STORE,
    unique_id: str | None = None,
) -> ReplayPlan:
    """Decide the files that rebuild ``version``; StateUnavailable when some are missing."""
    st, part = _partition(ckpt, operator, store, partition)
    provider = st.provider
    plan = ReplayPlan(operator, store, partition, part.path, provider, version, None)
    if version < 0:
        raise CkptError(f"{part.path}: version {version} is negative")
    if version == 0:
        return plan
    if provider == "hdfs":
        return _plan_chain(plan, part, FileKind.SNAPSHOT, FileKind.DELTA)
    if provider != "rocksdb":
        raise StateUnavailable(f"{part.path}: cannot tell the state store provider ({provider})")
    if _uses_unique_ids(ckpt, provider, part, version):
        plan.unique_id = unique_id or version_unique_id(ckpt, operator, store, partition, version)
        if plan.unique_id is None:
            raise _unknown_unique_id(
                part,
                version,
                hint="pick a batch whose commit is retained (ckpt versions lists them)",
            )
        return _plan_lineage(ckpt, plan, part)
    return _plan_chain(plan, part, FileKind.ZIP, FileKind.CHANGELOG)


def _uses_unique_ids(
    ckpt: Checkpoint, provider: str, part: Partition, version: int | None = None
) -> bool:
    """Checkpoint format v2 (RocksDB only): files named ``<version>_<uniqueId>``, the ones
    the commit log names. Version V was written in the format of ``commits/V-1``'s header
    when it is retained (Spark 4.3 runs a batch in the newest commit's format, so a
    ``ckpt convert --format-version`` batch switches it); else the checkpoint's."""
    if provider != "rocksdb":
        return False
    if version is not None and version - 1 in ckpt.batches.commits:
        try:
            return ckpt.commit(version - 1).log_version >= 2
        except FormatError:
            pass  # validate reports the entry; judge by the checkpoint
    return ckpt.checkpoint_format_version >= 2 or any(f.unique_id for f in part.files)


def _unknown_unique_id(part: Partition, version: int, hint: str | None = None) -> StateUnavailable:
    return StateUnavailable(
        f"{part.path}: checkpoint format v2 needs the uniqueId of version {version}, "
        f"and commits/{version - 1} (which records it) is not in the checkpoint",
        hint=hint,
        reason="UNKNOWN_UNIQUE_ID",
    )


def _one(part: Partition, version: int, kind: FileKind) -> CheckpointFile | None:
    sv = part.versions.get(version)
    if sv is None:
        return None
    found = [f for f in sv.files if f.kind is kind and f.unique_id is None]
    return found[0] if found else None


def _plan_chain(
    plan: ReplayPlan, part: Partition, base_kind: FileKind, step_kind: FileKind
) -> ReplayPlan:
    # The newest full copy at or below the version; else the chain must reach back to 1.
    base_version = 0
    for v in reversed(part.version_ids):
        if v <= plan.version and _one(part, v, base_kind) is not None:
            base_version = v
            break
    plan.base = _one(part, base_version, base_kind) if base_version else None
    missing = []
    for v in range(base_version + 1, plan.version + 1):
        step = _one(part, v, step_kind)
        if step is None:
            missing.append(v)
        else:
            plan.steps.append(step)
    if missing:
        ext = step_kind.value
        start = f"{base_version}.{base_kind.value}" if base_version else "the empty state"
        raise StateUnavailable(
            f"{part.path}: version {plan.version} cannot be rebuilt from {start}: "
            f"{_ranges(missing)} .{ext} missing",
            hint="ckpt versions shows which versions are retained",
            paths=tuple(f"{part.path}/{v}.{ext}" for v in missing),
        )
    return plan


def _plan_lineage(ckpt: Checkpoint, plan: ReplayPlan, part: Partition) -> ReplayPlan:
    version, uid = plan.version, plan.unique_id
    sv = part.versions.get(version)
    files = {(f.kind, f.version, f.unique_id): f for f in part.files if f.version is not None}
    zip_file = files.get((FileKind.ZIP, version, uid))
    if zip_file is not None:
        plan.base = zip_file
        return plan
    changelog = files.get((FileKind.CHANGELOG, version, uid))
    if changelog is None:
        present = ", ".join(sv.unique_ids) if sv else "none"
        raise _missing_unique_id_file(
            part,
            records.LineageEntry(version, uid or ""),
            f".zip or .changelog (the commit log's uniqueId); files at version {version} "
            f"carry ids: {present}",
        )
    lineage = read_changelog_header(ckpt, changelog).lineage or ()
    chain = [*lineage, records.LineageEntry(version, uid or "")]
    base_index = -1
    for i in range(len(chain) - 1, -1, -1):
        entry = chain[i]
        found = files.get((FileKind.ZIP, entry.version, entry.unique_id))
        if found is not None:
            plan.base, base_index = found, i
            break
    if plan.base is None and (not chain or chain[0].version != 1):
        raise StateUnavailable(
            f"{changelog.path}: its lineage starts at version {chain[0].version}, and no zip of "
            "the lineage is in the checkpoint",
            reason="LINEAGE_MISMATCH",
            paths=(changelog.path,),
        )
    for entry in chain[base_index + 1 :]:
        step = files.get((FileKind.CHANGELOG, entry.version, entry.unique_id))
        if step is None:
            raise _missing_lineage_link(ckpt, plan, part, changelog, entry)
        plan.steps.append(step)
    return plan


def _missing_unique_id_file(
    part: Partition, entry: records.LineageEntry, what: str
) -> StateUnavailable:
    """No file of the uniqueId the commit log recorded: ``<version>_<id>`` + ``what``."""
    name = f"{entry.version}_{entry.unique_id}"
    return StateUnavailable(
        f"{part.path}: no {name}{what}",
        reason="MISSING_UNIQUE_ID_FILE",
        paths=(f"{part.path}/{name}.changelog",),
    )


def _missing_lineage_link(
    ckpt: Checkpoint,
    plan: ReplayPlan,
    part: Partition,
    changelog: CheckpointFile,
    entry: records.LineageEntry,
) -> StateUnavailable:
    """The error Spark's load fails with (a changelog the lineage names does not exist),
    saying which id the commit log has for that version when it differs."""
    path = f"{part.path}/{entry.version}_{entry.unique_id}.changelog"
    try:
        recorded = version_unique_id(ckpt, plan.operator, plan.store, plan.partition, entry.version)
    except CkptError:
        recorded = None
    if recorded is not None and recorded != entry.unique_id:
        return StateUnavailable(
            f"{changelog.path}: its lineage names version {entry.version} as "
            f"{entry.unique_id}, which no file has (commits/{entry.version - 1} records "
            f"{recorded}); Spark fails: {path} does not exist",
            hint="validating every version (all_versions=True) lists every broken lineage; a "
            "best-effort read (best_effort=True) reads what the commit log names instead, "
            "and says so",
            reason="LINEAGE_MISMATCH",
            paths=(changelog.path, path),
        )
    return StateUnavailable(
        f"{part.path}: lineage of {changelog.entry.name} needs "
        f"{entry.version}_{entry.unique_id}.changelog, which is missing",
        reason="MISSING_UNIQUE_ID_FILE",
        paths=(path,),
    )


def _ranges(values: list[int]) -> str:
    out: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


# -- changelog headers (the lineage) ----------------------------------------------------------


def codec_of(ckpt: Checkpoint) -> str:
    """The codec the checkpoint's state files are compressed with (Spark's default: lz4)."""
    return ckpt.conf.get(COMPRESSION_CODEC_CONF, compression.LZ4)


def read_changelog_header(ckpt: Checkpoint, f: CheckpointFile) -> records.Changelog:
    # A ranged read of the head on object stores: the lineage is all that is wanted.
    with ckpt.storage.open_stream(f.path, header_only=True) as fh:
        changelog = records.open_changelog(
            f.path, compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt))
        )
        # The header is in the first chunk; drop the rest unread.
        changelog._window = None
        return changelog


# -- the change feed -------------------------------------------------------------------------


def change_file(
    ckpt: Checkpoint, operator: int, partition: int, version: int, *, store: str = DEFAULT_STORE
) -> CheckpointFile:
    """The delta or changelog holding the changes of ``version`` (batch ``version - 1``); in
    format v2 the changelog of the uniqueId the commit log recorded."""
    st, part = _partition(ckpt, operator, store, partition)
    sv = part.versions.get(version)
    files = sv.files if sv else []
    if st.provider == "hdfs":
        found = [f for f in files if f.kind is FileKind.DELTA]
    else:
        uid = version_unique_id(ckpt, operator, store, partition, version)
        found = [f for f in files if f.kind is FileKind.CHANGELOG and f.unique_id == uid]
    if not found:
        what = "delta" if st.provider == "hdfs" else "changelog"
        raise StateUnavailable(f"{part.path}: no {what} file for version {version}")
    return found[0]


def change_files(
    ckpt: Checkpoint,
    operator: int,
    partition: int,
    start_version: int,
    end_version: int,
    *,
    store: str = DEFAULT_STORE,
) -> list[CheckpointFile]:
    """The delta/changelog of every version start..end, as Spark's change feed picks them.

    In checkpoint format v2 Spark (``RocksDB.getFullLineage``) starts from the uniqueId the
    commit log recorded for the end version and walks back through the lineage lines of the
    changelogs, so a broken lineage fails the feed even where the commit log is right.
    """
    st, part = _partition(ckpt, operator, store, partition)
    if not _uses_unique_ids(ckpt, st.provider, part, end_version):
        return [
            change_file(ckpt, operator, partition, v, store=store)
            for v in range(start_version, end_version + 1)
        ]
    end_uid = version_unique_id(ckpt, operator, store, partition, end_version)
    if end_uid is None:
        raise _unknown_unique_id(part, end_version)
    files = {
        (f.version, f.unique_id): f
        for f in part.files
        if f.kind is FileKind.CHANGELOG and f.version is not None
    }
    plan = ReplayPlan(operator, store, partition, part.path, st.provider, end_version, None)
    # Newest first, as Spark collects it.
    chain = [records.LineageEntry(end_version, end_uid)]
    named_by: dict[int, CheckpointFile] = {}
    while chain[-1].version > start_version:
        last = chain[-1]
        f = files.get((last.version, last.unique_id))
        if f is None:
            if last.version in named_by:
                raise _missing_lineage_link(ckpt, plan, part, named_by[last.version], last)
            raise _missing_unique_id_file(
                part, last, f".changelog (the commit log's uniqueId for version {last.version})"
            )
        lineage = read_changelog_header(ckpt, f).lineage or ()
        older = sorted(
            (e for e in lineage if start_version <= e.version < last.version),
            key=lambda e: -e.version,
        )
        if not older:
            raise StateUnavailable(
                f"{f.path}: its lineage names no version from {start_version} to "
                f"{last.version - 1}, which the change feed needs",
                reason="LINEAGE_MISMATCH",
                paths=(f.path,),
            )
        for e in older:
            named_by.setdefault(e.version, f)
        chain.extend(older)
    chain.reverse()
    versions = [e.version for e in chain]
    if versions != list(range(start_version, end_version + 1)):
        raise StateUnavailable(
            f"{part.path}: the lineage from version {end_version} back to {start_version} is "
            f"not one version after another ({', '.join(map(str, versions))})",
            reason="LINEAGE_MISMATCH",
            paths=tuple(named_by[v].path for v in sorted(named_by)),
        )
    out = []
    for e in chain:
        f = files.get((e.version, e.unique_id))
        if f is None:
            raise _missing_lineage_link(ckpt, plan, part, named_by[e.version], e)
        out.append(f)
    return out
