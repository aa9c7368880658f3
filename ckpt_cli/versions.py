"""``ckpt versions``: batches, operators, stores, partitions and state store versions.

:func:`describe_versions` returns a :class:`VersionsReport` (its JSON is documented in the
README); the CLI renders it as Rich tables or writes its JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from operator import attrgetter
from typing import Any

from ckpt_cli.core.model import (
    SHARED_KINDS,
    Checkpoint,
    FileKind,
    Operator,
    Partition,
)
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import logs, tws
from ckpt_cli.results import Report
from ckpt_cli.storage.listing import collector_paused
from ckpt_cli.validate.headline import Headline, headline

_entry_size = attrgetter("entry.size")


@dataclass(frozen=True)
class PartitionVersions:
    id: int
    path: str
    versions: list[int]
    min_version: int | None
    max_version: int | None
    snapshot_versions: list[int]  # .snapshot (HDFS) or .zip (RocksDB): a full copy of the state
    files: int
    bytes: int
    shared_files: int
    # Checkpoint format v2: the uniqueIds of each version's files (several after retries).
    unique_ids: dict[str, list[str]]

    def to_json(self) -> dict[str, Any]:
        # Written out, not asdict (which deep-copies value by value): there is one of these
        # per partition, with a list of every version.
        out: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "versions": list(self.versions),
            "min_version": self.min_version,
            "max_version": self.max_version,
            "snapshot_versions": list(self.snapshot_versions),
            "files": self.files,
            "bytes": self.bytes,
            "shared_files": self.shared_files,
        }
        if self.unique_ids:
            out["unique_ids"] = {v: list(ids) for v, ids in self.unique_ids.items()}
        return out


@dataclass(frozen=True)
class StoreVersions:
    name: str
    provider: str
    schema_files: list[str]
    num_partitions: int
    min_version: int | None
    max_version: int | None
    partitions: list[PartitionVersions]

    def to_json(self) -> dict[str, Any]:
        # asdict of the rest only: the partitions are converted once, by their to_json.
        return {
            **asdict(replace(self, partitions=[])),
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True)
class StateVariableInfo:
    """A transformWithState state variable as operator metadata v2 declares it."""

    name: str
    kind: str  # value, list, map or timer (Spark's stateVariableType shortened)
    ttl: bool


@dataclass(frozen=True)
class StateEra:
    """The batches an operator ran under one ``_metadata/v2/<batch>`` file (written at the
    first batch of each run of the query): the state variables it declares and, per column
    family of its stores, the schema ids of the schema file in force (the last one it names;
    a value schema that evolved under Avro has a new id)."""

    metadata_file: str
    first_batch: int
    # The batch before the next file's; the newest file: the last committed batch (None when
    # none committed since it was written).
    last_batch: int | None
    state_variables: list[StateVariableInfo]
    # Store -> the schema file in force (state/<op>/_stateSchema/<store>/<batch>_<uuid>).
    schema_files: dict[str, str]
    # Store -> column family -> [key schema id, value schema id] in that file.
    schema_ids: dict[str, dict[str, list[int]]]


@dataclass(frozen=True)
class OperatorVersions:
    id: int
    name: str | None  # from the newest operator metadata file (Spark 4.0+)
    path: str
    metadata_files: list[str]
    stores: list[StoreVersions]
    # From operator metadata v2's operatorPropertiesJson (transformWithState).
    time_mode: str | None
    state_variables: list[StateVariableInfo]
    # _stateSchema/<store>/ (schema file v3), shared by the operator's column families.
    schema_files: list[str]
    # spark.sql.streaming.join.stateFormatVersion for a stream-stream join: 1-2 keep four
    # stores, 3-4 one store with a column family per former store.
    join_state_format: int | None
    # Operator metadata v2: which batches ran under which metadata file, variables and
    # schema ids, oldest first (state_variables above are the newest's).
    state_history: list[StateEra]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(replace(self, stores=[])), "stores": [s.to_json() for s in self.stores]}


@dataclass(frozen=True)
class Batches:
    offsets: list[int]
    commits: list[int]
    latest_offsets: int | None
    latest_committed: int | None
    in_flight: list[int]
    offsets_gaps: list[int]
    commits_gaps: list[int]
    commits_without_offsets: list[int]
    latest_batch_watermark_ms: int | None
    latest_batch_timestamp_ms: int | None


@dataclass(frozen=True)
class Settings:
    shuffle_partitions: int | None
    state_store_provider: str | None
    compression_codec: str | None
    checkpoint_format_version: int
    offsets_log_version: int | None
    sources: int | None


@dataclass(frozen=True)
class FileCounts:
    count: int
    bytes: int
    by_kind: dict[str, int]
    temp: list[str]  # leftovers of interrupted writes
    unknown: list[str]


@dataclass(frozen=True)
class VersionsReport(Report):
    """Everything ``ckpt versions`` shows. A description, never a problem: ``validate`` judges."""

    checkpoint: str
    headline: Headline
    query_id: str | None
    batches: Batches
    settings: Settings
    conf: dict[str, str]
    operators: list[OperatorVersions]
    files: FileCounts

    def body_json(self) -> dict[str, Any]:
        return {
            **asdict(replace(self, operators=[])),
            "headline": self.headline.to_json(),
            "operators": [op.to_json() for op in self.operators],
        }


def _partition_versions(part: Partition) -> PartitionVersions:
    versions = part.version_ids
    files = part.files
    return PartitionVersions(
        id=part.id,
        path=part.path,
        versions=versions,
        min_version=versions[0] if versions else None,
        max_version=versions[-1] if versions else None,
        snapshot_versions=part.snapshot_versions,
        files=len(files),
        bytes=part.bytes,
        shared_files=sum([f.kind in SHARED_KINDS for f in files]),
        unique_ids={str(v): ids for v, ids in part.unique_ids.items()},
    )


def _operators(
    checkpoint: Checkpoint, operator: int | None, partitions: Sequence[int] | None
) -> list[OperatorVersions]:
    wanted_parts = set(partitions) if partitions else None
    out = []
    for op in checkpoint.operators.values():
        if operator is not None and op.id != operator:
            continue
        meta, meta_v2 = _operator_metadata(checkpoint, op)
        stores = []
        for store in op.stores.values():
            parts = [
                _partition_versions(p)
                for p in store.partitions.values()
                if wanted_parts is None or p.id in wanted_parts
            ]
            # Each partition's lowest and highest, not a list of every version of every one.
            lows = [min(p.versions) for p in store.partitions.values() if p.versions]
            highs = [max(p.versions) for p in store.partitions.values() if p.versions]
            stores.append(
                StoreVersions(
                    name=store.name,
                    provider=store.provider,
                    schema_files=[f.path for f in store.schema_files],
                    num_partitions=len(store.partitions),
                    min_version=min(lows, default=None),
                    max_version=max(highs, default=None),
                    partitions=parts,
                )
            )
        out.append(
            OperatorVersions(
                id=op.id,
                name=meta.operator_name if meta else None,
                path=op.path,
                metadata_files=[f.path for f in op.metadata_files],
                stores=stores,
                time_mode=meta_v2.time_mode if meta_v2 else None,
                state_variables=[
                    StateVariableInfo(v.name, v.short_kind, v.ttl_enabled)
                    for v in (meta_v2.state_variables if meta_v2 else ())
                ],
                schema_files=[f.path for f in op.schema_files],
                join_state_format=_join_state_format(checkpoint, meta),
                state_history=_state_history(checkpoint, op),
            )
        )
    return out


def _state_history(checkpoint: Checkpoint, op: Operator) -> list[StateEra]:
    """Every ``_metadata/v2/<batch>`` file and what it declares; unreadable files are left
    out (validate reports them)."""
    from ckpt_cli.core.history import operator_history

    if not op.metadata_v2_files:
        return []
    try:
        history = operator_history(checkpoint, op.id)
    except (CkptError, FormatError):
        return []
    latest = checkpoint.batches.latest_committed
    out = []
    for era in history.eras:
        following = history.era_after(era)
        if following is not None:
            last: int | None = following.batch - 1
        else:
            last = latest if latest is not None and latest >= era.batch else None
        files: dict[str, str] = {}
        ids: dict[str, dict[str, list[int]]] = {}
        for store in era.schema_paths:
            try:
                schemas = history.schemas(era, store)
            except (CkptError, FormatError):
                schemas = None
            if schemas is None:
                continue
            files[store] = schemas.path
            ids[store] = {
                cf.name: [cf.key_schema_id, cf.value_schema_id]
                for cf in schemas.active.column_families
                if cf.name != "default"
            }
        out.append(
            StateEra(
                metadata_file=era.path,
                first_batch=era.batch,
                last_batch=last,
                state_variables=[
                    StateVariableInfo(v.name, v.short_kind, v.ttl_enabled)
                    for v in era.metadata.state_variables
                ],
                schema_files=files,
                schema_ids=ids,
            )
        )
    return out


def _operator_metadata(
    checkpoint: Checkpoint, op: Operator
) -> tuple[logs.OperatorMetadata | tws.OperatorMetadataV2 | None, tws.OperatorMetadataV2 | None]:
    """The newest ``_metadata/v2/<batch>`` file (what Spark 4.x reads), else the v1 file.
    Unreadable files count as absent: Spark restarts without v1 too; validate reports them."""
    v2 = op.metadata_v2_files
    if v2:
        f = v2[max(v2)]
        try:
            meta = tws.parse_operator_metadata_v2(f.path, checkpoint.storage.read_bytes(f.path))
            return meta, meta
        except FormatError:
            pass
    try:
        return checkpoint.operator_metadata(op.id), None
    except FormatError:
        return None, None


def _join_state_format(
    checkpoint: Checkpoint, meta: logs.OperatorMetadata | tws.OperatorMetadataV2 | None
) -> int | None:
    if meta is None or meta.operator_name != "symmetricHashJoin":
        return None
    value = checkpoint.conf.get("spark.sql.streaming.join.stateFormatVersion")
    return int(value) if value is not None and value.isdigit() else None


def describe_versions(
    checkpoint: Checkpoint,
    operator: int | None = None,
    partitions: Sequence[int] | None = None,
) -> VersionsReport:
    """Everything ``ckpt versions`` shows, optionally for one operator and some partitions.

    Whatever can be read is shown: an unreadable latest log entry is the headline's reason
    why the query cannot restart, and the confs come from the newest readable one."""
    # The report adds a few objects per version, all kept: the collector's passes over them
    # are wasted (124 gen-0 and 10 gen-1 passes at 176k files), as for the listing and the
    # model (``Checkpoint.operators`` pauses it itself).
    with collector_paused():
        return _describe(checkpoint, operator, partitions)


def _describe(
    checkpoint: Checkpoint, operator: int | None, partitions: Sequence[int] | None
) -> VersionsReport:
    # One tolerant view for the headline and the report: the model (operators, stores,
    # partitions) is then built once.
    checkpoint = checkpoint.tolerant_view()
    first = headline(checkpoint)
    ops = checkpoint.operators
    if operator is not None and operator not in ops:
        known = ", ".join(str(o) for o in ops) or "none"
        raise CkptError(
            f"{checkpoint.storage.url}: operator {operator} has no state (operators: {known})"
        )
    batches = checkpoint.batches
    latest = checkpoint.latest_offsets
    conf = checkpoint.conf
    try:
        query_id = checkpoint.query_id
    except FormatError:
        query_id = None  # the headline names the file
    return VersionsReport(
        checkpoint=checkpoint.storage.url,
        headline=first,
        query_id=query_id,
        batches=Batches(
            offsets=list(batches.offsets),
            commits=list(batches.commits),
            latest_offsets=batches.latest_offsets,
            latest_committed=batches.latest_committed,
            in_flight=list(batches.in_flight),
            offsets_gaps=list(batches.offsets_gaps),
            commits_gaps=list(batches.commits_gaps),
            commits_without_offsets=list(batches.commits_without_offsets),
            latest_batch_watermark_ms=latest.batch_watermark_ms if latest else None,
            latest_batch_timestamp_ms=latest.batch_timestamp_ms if latest else None,
        ),
        settings=Settings(
            shuffle_partitions=latest.shuffle_partitions if latest else None,
            state_store_provider=checkpoint.configured_provider,
            compression_codec=conf.get(logs.COMPRESSION_CODEC, "lz4") if latest else None,
            checkpoint_format_version=checkpoint.checkpoint_format_version,
            offsets_log_version=latest.log_version if latest else None,
            sources=len(latest.source_offsets) if latest else None,
        ),
        conf=conf,
        operators=_operators(checkpoint, operator, partitions),
        files=FileCounts(
            count=len(checkpoint.files),
            bytes=sum(map(_entry_size, checkpoint.files)),
            by_kind=checkpoint.count_by_kind(),
            temp=[f.path for f in checkpoint.of_kind(FileKind.TEMP)],
            unknown=[f.path for f in checkpoint.of_kind(FileKind.UNKNOWN)],
        ),
    )
