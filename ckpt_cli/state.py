"""The state of one store partition at one version, rebuilt from its files as Spark does.

* HDFS-backed store (docs §3.3): the newest ``.snapshot`` at or below the version (or the empty
  map at version 0), then every ``.delta`` after it, in order.
* RocksDB, checkpoint format v1 (§5.3): the newest ``.zip`` at or below the version (its SSTs
  rebuilt into a temporary RocksDB directory and iterated), then every ``.changelog`` after it.
* RocksDB, checkpoint format v2 (§7): the version's ``uniqueId`` comes from the commit log;
  ``<v>_<id>.zip`` if present, else the lineage in ``<v>_<id>.changelog`` names the ancestors,
  the newest zip on that lineage is the base, and the lineage's changelogs are replayed.

``plan_version`` only decides which files are needed (no reads), so ``validate`` can use it to
tell whether a version is recoverable; ``load_state`` reads them.
"""

from __future__ import annotations

import datetime as dt
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import compression, records, rocksdb
from ckpt_cli.formats.schema import StateSchema, parse_state_schema
from ckpt_cli.formats.unsaferow import make_decoder
from ckpt_cli.model import DEFAULT_STORE, Checkpoint, CheckpointFile, FileKind, Partition, Store
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage import Storage

COMPRESSION_CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
ROW_CHECKSUM_CONF = "spark.sql.streaming.stateStore.rowChecksum.enabled"


class StateUnavailable(CkptError):
    """The files needed to rebuild a version are not (all) in the checkpoint.

    ``reason`` says which way, in the words of ``ckpt validate``'s finding codes:
    ``MISSING_STATE_FILE``, ``MISSING_UNIQUE_ID_FILE``, ``LINEAGE_MISMATCH``,
    ``UNKNOWN_UNIQUE_ID``; ``paths`` are the files that should be there.
    """

    code = "state-unavailable"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        reason: str = "MISSING_STATE_FILE",
        paths: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, hint=hint)
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

    def to_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "store": self.store,
            "partition": self.partition,
            "provider": self.provider,
            "version": self.version,
            "unique_id": self.unique_id,
            "base": self.base.path if self.base else None,
            "steps": [f.path for f in self.steps],
        }


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
    if ckpt.checkpoint_format_version >= 2 or any(f.unique_id for f in part.files):
        plan.unique_id = unique_id or version_unique_id(ckpt, operator, store, partition, version)
        if plan.unique_id is None:
            raise StateUnavailable(
                f"{part.path}: checkpoint format v2 needs the uniqueId of version {version}, "
                f"and commits/{version - 1} (which records it) is not in the checkpoint",
                hint="pick a batch whose commit is retained (ckpt versions lists them)",
                reason="UNKNOWN_UNIQUE_ID",
            )
        return _plan_lineage(ckpt, plan, part)
    return _plan_chain(plan, part, FileKind.ZIP, FileKind.CHANGELOG)


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
        raise StateUnavailable(
            f"{part.path}: no {version}_{uid}.zip or .changelog (the commit log's uniqueId); "
            f"files at version {version} carry ids: {present}",
            reason="MISSING_UNIQUE_ID_FILE",
            paths=(f"{part.path}/{version}_{uid}.changelog",),
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
            hint="ckpt validate --all-versions lists every broken lineage; ckpt replay "
            "--best-effort reads what the commit log names instead, and says so",
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


# -- reading ---------------------------------------------------------------------------------


def codec_of(ckpt: Checkpoint) -> str:
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


# Zips up to this size are read in one request; larger ones by ranges (two small requests:
# the central directory and the metadata entry, not a MANIFEST of megabytes inside).
WHOLE_ZIP_BYTES = 1 << 20


def read_zip_metadata(
    storage: Storage, path: str, size: int | None
) -> rocksdb.RocksDBCheckpointMetadata:
    """The metadata of a ``<v>.zip``: whole when small (or of unknown size), else by range."""
    if size is None or size <= WHOLE_ZIP_BYTES:
        return rocksdb.read_zip(path, storage.read_bytes(path)).metadata
    with storage.open_random(path) as fh:
        return rocksdb.read_zip(path, fh).metadata


def iter_file_records(
    ckpt: Checkpoint, f: CheckpointFile, stats: records.RecordStats | None = None
) -> Iterator[tuple[str, bytes, bytes | None]]:
    """``(type, key, value)`` of a delta, snapshot or changelog, streamed from storage."""
    with ckpt.storage.open_stream(f.path) as fh:
        chunks = compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt))
        if f.kind is FileKind.CHANGELOG:
            changelog = records.open_changelog(f.path, chunks)
            yield from changelog.records()
            if stats is not None:
                stats.__dict__.update(changelog.stats.__dict__)
            return
        for key, value in records.iter_kv_records(
            f.path, chunks, snapshot=f.kind is FileKind.SNAPSHOT, stats=stats
        ):
            yield (records.PUT, key, value) if value is not None else (records.DELETE, key, None)


def _snapshot_rows(ckpt: Checkpoint, f: CheckpointFile) -> Iterator[tuple[bytes, bytes]]:
    """A snapshot's (key, value) pairs, with no per-record repacking (the replay hot path)."""
    with ckpt.storage.open_stream(f.path) as fh:
        chunks = compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt))
        yield from records.iter_kv_records(f.path, chunks, snapshot=True)  # type: ignore[misc]


def _zip_rows(
    ckpt: Checkpoint, f: CheckpointFile, part: Partition
) -> Iterator[tuple[bytes, bytes]]:
    zip_bytes = ckpt.storage.read_bytes(f.path)
    prefix = part.path + "/"

    def fetch(rel: str) -> bytes:
        path = prefix + rel
        if ckpt.listing.get(path) is None:
            raise StateUnavailable(
                f"{path}: named by {f.path} but not in the checkpoint",
                reason="MISSING_SST",
                paths=(path,),
            )
        return ckpt.storage.read_bytes(path)

    def copy(rel: str, dest: Path) -> int:
        fetch_check = prefix + rel
        if ckpt.listing.get(fetch_check) is None:
            fetch(rel)  # raises StateUnavailable naming the file
        size = 0
        with ckpt.storage.open_stream(fetch_check) as src, open(dest, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
                size += len(chunk)
        return size

    with tempfile.TemporaryDirectory(prefix="ckpt-rocksdb-") as tmp:
        rocksdb.rebuild_db_dir(zip_bytes, fetch, tmp, path=f.path, copy_shared=copy)
        yield from rocksdb.iter_db(tmp, path=f.path)


def _check_row_checksums(ckpt: Checkpoint, plan: ReplayPlan) -> None:
    if ckpt.conf.get(ROW_CHECKSUM_CONF, "false").lower() == "true":
        raise CkptError(
            f"{plan.path}: rows carry checksums (rowChecksum.enabled=true), which ckpt does "
            "not decode yet"
        )


# Pending changes, collected from the deltas/changelogs after the base: key -> new value, or
# None for a remove. Plain values, not (kind, value) tuples: a tuple costs 56 bytes a key,
# which is most of the memory of a large change set.
_Changes = dict[bytes, bytes | None]
_ABSENT: Any = object()


def _merge(old: bytes | None, value: bytes) -> bytes:
    # RocksDB's StringAppend merge operator, as Spark configures it.
    return value if old is None else old + rocksdb.MERGE_DELIMITER + value


def iter_state(
    ckpt: Checkpoint, plan: ReplayPlan, progress: ProgressSink = NULL_PROGRESS
) -> Iterator[tuple[bytes, bytes]]:
    """The raw ``(key, value)`` pairs of the store at ``plan.version``, streamed.

    The changes of the deltas/changelogs after the base are collected first (memory in
    proportion to them, as bytes); then the base snapshot or zip is streamed and each of its
    rows is emitted as it is, replaced, or dropped; keys only the changes know come last.
    Keys and values are as stored (raw UnsafeRows for HDFS, Spark's RocksDB encoding for
    RocksDB). Row order is the base's, then the changes'.
    """
    _check_row_checksums(ckpt, plan)
    part = ckpt.operators[plan.operator].stores[plan.store].partitions[plan.partition]
    progress.start(f"Rebuilding {plan.path} version {plan.version}", total=len(plan.files))
    try:
        changes: _Changes = {}
        merges: dict[bytes, list[bytes]] = {}
        # With no base, the first delta (usually the largest: every key's first put) is
        # streamed like a snapshot instead of held in memory.
        first = None
        if plan.base is None and plan.steps and plan.steps[0].kind is FileKind.DELTA:
            first = plan.steps[0]
        for step in plan.steps[1:] if first is not None else plan.steps:
            for kind, key, value in iter_file_records(ckpt, step):
                if kind == records.MERGE:
                    assert value is not None
                    if key in changes:
                        changes[key] = _merge(changes[key], value)
                    else:
                        merges.setdefault(key, []).append(value)
                    continue
                changes[key] = value if kind == records.PUT else None
                merges.pop(key, None)
            progress.advance()
        base: Iterator[tuple[bytes, bytes]] | None = None
        if first is not None:
            base = _first_delta_rows(ckpt, first)
        elif plan.base is not None and plan.base.kind is FileKind.ZIP:
            base = _zip_rows(ckpt, plan.base, part)
        elif plan.base is not None:
            base = _snapshot_rows(ckpt, plan.base)
        if base is not None:
            for key, value in base:
                change = changes.pop(key, _ABSENT) if changes else _ABSENT
                if change is not _ABSENT:
                    if change is not None:
                        yield key, change
                    continue
                pending = merges.pop(key, None) if merges else None
                if pending is not None:
                    for extra in pending:
                        value = _merge(value, extra)
                yield key, value
            progress.advance()
        for key, change in changes.items():
            if change is not None:
                yield key, change
        for key, pending in merges.items():
            merged: bytes | None = None
            for extra in pending:
                merged = _merge(merged, extra)
            assert merged is not None
            yield key, merged
    finally:
        progress.close()


# Bits of the key-hash bitmaps per compressed byte of the delta: a record takes >= ~10
# compressed bytes, so false "repeated" flags (each costing one held entry) stay under ~5%.
_BITMAP_BITS_PER_BYTE = 2
_BITMAP_BITS: int | None = None  # a fixed size, for tests


def _bitmap_bits(compressed_size: int) -> int:
    if _BITMAP_BITS is not None:
        return _BITMAP_BITS
    wanted = max(1 << 16, compressed_size * _BITMAP_BITS_PER_BYTE)
    return min(1 << 30, 1 << (wanted - 1).bit_length())


def _first_delta_rows(ckpt: Checkpoint, delta: CheckpointFile) -> Iterator[tuple[bytes, bytes]]:
    """The rows of a delta applied to the empty state, each key once, in bounded memory: a
    base to stream like a snapshot.

    A delta may name a key more than once (the last record wins) or remove a key. A first
    pass flags possibly-repeated keys in a bitmap of key hashes (no false negatives); in the
    second, keys never repeated are emitted as they stream by, and only the flagged ones are
    held until the end of the file.
    """
    bits = _bitmap_bits(delta.entry.size)
    seen = bytearray(bits // 8)
    repeated = bytearray(bits // 8)
    mask = bits - 1
    for _kind, key, _value in iter_file_records(ckpt, delta):
        h = hash(key) & mask
        byte, bit = h >> 3, 1 << (h & 7)
        if seen[byte] & bit:
            repeated[byte] |= bit
        else:
            seen[byte] |= bit
    del seen
    held: dict[bytes, bytes | None] = {}
    for kind, key, value in iter_file_records(ckpt, delta):
        h = hash(key) & mask
        if repeated[h >> 3] & (1 << (h & 7)):
            held[key] = value if kind == records.PUT else None
        elif kind == records.PUT and value is not None:
            yield key, value
        # else: removing a key the empty state does not have
    for key, value in held.items():
        if value is not None:
            yield key, value


def load_state(
    ckpt: Checkpoint, plan: ReplayPlan, progress: ProgressSink = NULL_PROGRESS
) -> dict[bytes, bytes]:
    """The raw key -> value bytes of the store at ``plan.version`` (see ``iter_state``)."""
    return dict(iter_state(ckpt, plan, progress))


# -- schemas and decoding --------------------------------------------------------------------


def store_schema(ckpt: Checkpoint, operator: int, store: str) -> StateSchema | None:
    """The key/value schema Spark wrote for a store (``_metadata/schema`` of partition 0, or
    the newest ``_stateSchema`` file of Spark 4.x), or None when there is none."""
    st = ckpt.operators[operator].stores.get(store)
    candidates = list(st.schema_files) if st else []
    if not candidates:
        op_files = ckpt.operators[operator].schema_files
        candidates = [f for f in op_files if f"/_stateSchema/{store}/" in f"/{f.path}/"]
    if not candidates:
        return None
    newest = max(candidates, key=lambda f: (f.entry.mtime or 0, f.path))
    return parse_state_schema(newest.path, ckpt.storage.read_bytes(newest.path))


class RowDecoder:
    """Turns a store's raw key/value bytes into Python values.

    HDFS values are read as ``valueSize & ~7`` bytes (Spark < 2.3 appended 4 junk bytes);
    RocksDB keys and values lose their encoding version byte. Without a schema, rows are hex.
    """

    def __init__(self, schema: StateSchema | None, provider: str, *, path: str = "<state>") -> None:
        self.schema = schema
        self.path = path
        self._rocks = provider == "rocksdb"
        self.rocks = self._rocks
        self._key = make_decoder(schema.key, path=path) if schema else None
        self._value = make_decoder(schema.value, path=path) if schema else None
        self._json: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None

    def key_row(self, data: bytes) -> bytes:
        return rocksdb.decode_rocksdb_key(data, path=self.path).row if self._rocks else data

    def value_row(self, data: bytes) -> bytes:
        if self._rocks:
            return rocksdb.decode_rocksdb_value(data, path=self.path)
        return data[: len(data) & ~7]

    def key(self, data: bytes) -> Any:
        row = self.key_row(data)
        return self._key(row) if self._key else row.hex()

    def value(self, data: bytes | None) -> Any:
        if data is None:
            return None
        row = self.value_row(data)
        return self._value(row) if self._value else row.hex()

    def __call__(self, key: bytes, value: bytes | None) -> tuple[Any, Any]:
        return self.key(key), self.value(value)

    def json_row(self, key: bytes, value: bytes | None) -> tuple[Any, Any]:
        """Key and value as plain JSON (see ``json_value``), compiled for the schema."""
        if self._json is None:
            from ckpt_cli.jsonvalues import struct_converter

            if self.schema is None:
                self._json = (lambda v: v, lambda v: v)
            else:
                self._json = (
                    struct_converter(self.schema.key),
                    struct_converter(self.schema.value),
                )
        to_key, to_value = self._json
        return to_key(self.key(key)), to_value(self.value(value))


def row_decoder(schema: StateSchema | None, provider: str, *, path: str = "<state>") -> RowDecoder:
    return RowDecoder(schema, provider, path=path)


def decoded_rows(
    ckpt: Checkpoint, plan: ReplayPlan, state: dict[bytes, bytes]
) -> Iterator[tuple[Any, Any]]:
    """Decoded ``(key, value)`` of a loaded state, in key byte order."""
    schema = store_schema(ckpt, plan.operator, plan.store)
    decode = row_decoder(schema, plan.provider, path=plan.path)
    for key in sorted(state):
        yield decode(key, state[key])


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
    v2 = st.provider == "rocksdb" and (
        ckpt.checkpoint_format_version >= 2 or any(f.unique_id for f in part.files)
    )
    if not v2:
        return [
            change_file(ckpt, operator, partition, v, store=store)
            for v in range(start_version, end_version + 1)
        ]
    end_uid = version_unique_id(ckpt, operator, store, partition, end_version)
    if end_uid is None:
        raise StateUnavailable(
            f"{part.path}: checkpoint format v2 needs the uniqueId of version {end_version}, "
            f"and commits/{end_version - 1} (which records it) is not in the checkpoint",
            reason="UNKNOWN_UNIQUE_ID",
        )
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
            raise StateUnavailable(
                f"{part.path}: no {last.version}_{last.unique_id}.changelog (the commit log's "
                f"uniqueId for version {last.version})",
                reason="MISSING_UNIQUE_ID_FILE",
                paths=(f"{part.path}/{last.version}_{last.unique_id}.changelog",),
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


def iter_changes(
    ckpt: Checkpoint,
    operator: int,
    partition: int,
    start_batch: int,
    end_batch: int,
    *,
    store: str = DEFAULT_STORE,
) -> Iterator[tuple[int, str, bytes, bytes | None]]:
    """``(batch, type, key, value)`` of every change written by batches start..end, the way
    Spark's change feed reads them (one delta/changelog per version, ``change_files``)."""
    files = change_files(ckpt, operator, partition, start_batch + 1, end_batch + 1, store=store)
    for batch, f in zip(range(start_batch, end_batch + 1), files, strict=True):
        for kind, key, value in iter_file_records(ckpt, f):
            yield batch, kind, key, value


# -- JSON ------------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """A decoded value as plain JSON: timestamps ISO-8601 in UTC with ``Z`` (naive ones as
    they are), dates ISO, decimals as strings (exact), binary as hex, non-finite floats as
    strings."""
    if isinstance(value, dt.datetime):
        from ckpt_cli.jsonvalues import format_timestamp

        return format_timestamp(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
