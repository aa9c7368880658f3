"""Which new partition each state row goes to.

A stateful operator's input is shuffled by ``HashPartitioning(keys, numPartitions)``: a row
goes to ``pmod(Murmur3Hash(keys), numPartitions)`` (``formats.murmur3``), and its state lives
in that partition. Which columns of a *state key* are those shuffle keys depends on the
operator and, for stores with column families, on the family, as Spark 4.3's own offline
repartition has it (``StatePartitionKeyExtractorFactory``): the whole key for aggregation,
dedup (within watermark too) and flatMapGroupsWithState/applyInPandasWithState; a session
window's key without its last column (the session start); a join's keys without
``keyWithIndexToValue``'s ``index`` or format 4's ``__event_time``; transformWithState's
grouping key: a map variable's ``key`` of (key, userKey), a TTL index's ``elementKey`` (of a
map: ``elementKey.key``), a timer's ``key``, the whole key of the rest.

A key is the decoded row of ``formats.unsaferow`` / ``formats.state_encoders`` (a dict in
key-schema order, or a tuple); ``PartitionKey`` says where in it the shuffle keys sit.
Operators and families not in the table are refused with a ``FormatError`` naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ckpt_cli.core.history import operator_history
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import read_zip_metadata, store_schema
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import murmur3, murmur3_columns
from ckpt_cli.formats import state_encoders as encoders
from ckpt_cli.formats.spark_types import DataType, StructType
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.formats.tws import family_role
from ckpt_cli.state.decoders import RowDecoder
from ckpt_cli.state.reader import decoder_for
from ckpt_cli.state.tws import family_reader, operator_metadata_v2, zips_of

AGGREGATION = "stateStoreSave"
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"
JOIN = "symmetricHashJoin"
# Operators whose state key is exactly the shuffle's key.
WHOLE_KEY_OPERATORS = frozenset(
    {
        AGGREGATION,
        "dedupe",
        "dedupeWithinWatermark",
        "flatMapGroupsWithState",
        "applyInPandasWithState",
    }
)
TWS_OPERATORS = frozenset(
    {"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"}
)
SUPPORTED_OPERATORS = WHOLE_KEY_OPERATORS | TWS_OPERATORS | {SESSION_WINDOW, JOIN}

# A join family's key: the join keys, then (for these families) one column that is not.
_JOIN_TRAILING = {
    "keyToNumValues": None,
    "keyWithIndexToValue": "index",
    "keyWithTsToValues": "__event_time",
    "tsWithKey": "__event_time",
}
SESSION_START = "sessionStartTime"
DEFAULT_FAMILY = "default"


@dataclass(frozen=True)
class PartitionKey:
    """Where the shuffle's partitioning columns sit in a decoded state key.

    ``path``: the ordinals of nested struct fields leading to the struct that holds them
    (empty: the key row itself); ``columns``: their ordinals in that struct, in order.
    ``path_keys``/``column_keys``: the same as the keys of decoded dict rows (the structs'
    ``unique_names``), for the fast path over many keys.
    """

    operator: str
    family: str
    path: tuple[int, ...]
    columns: tuple[int, ...]
    names: tuple[str, ...]  # dotted, for messages and reports
    types: tuple[DataType, ...]
    path_keys: tuple[str, ...] = ()
    column_keys: tuple[str, ...] = ()

    def values(self, key: Any) -> list[Any]:
        """The partitioning columns' values of a decoded key."""
        row = key
        for ordinal in self.path:
            row = _fields(row)[ordinal]
            if row is None:
                return [None] * len(self.columns)
        fields = _fields(row)
        return [fields[i] for i in self.columns]

    def hash(self, key: Any) -> int:
        """``Murmur3Hash`` of the partitioning columns (seed 42)."""
        return murmur3.hash_row(self.values(key), self.types)

    def partition(self, key: Any, m: int) -> int:
        """The partition of ``m`` the shuffle sends the key to. With no columns (a global
        aggregation) the operator's input is one partition (``AllTuples``): 0, whatever
        ``m`` (Spark 4.3's own repartition puts it at ``pmod(42, m)``, where the restarted
        query never reads it)."""
        return murmur3.pmod(self.hash(key), m) if self.columns else 0

    def partitions(self, keys: Sequence[Any], m: int) -> npt.NDArray[np.int64]:
        """``partition`` of many keys, hashed column by column with numpy."""
        if not self.columns:
            return np.zeros(len(keys), dtype=np.int64)
        hashes = murmur3_columns.hash_columns(self._columns(keys), self.types, len(keys))
        return murmur3_columns.pmod_array(hashes, m)

    def _columns(self, keys: Sequence[Any]) -> list[list[Any]]:
        if len(self.path_keys) == len(self.path) and len(self.column_keys) == len(self.columns):
            try:  # dict rows all the way down (what the decoders give): plain lookups
                rows = keys
                for name in self.path_keys:
                    rows = [row[name] for row in rows]
                return [[row[name] for row in rows] for name in self.column_keys]
            except (TypeError, KeyError, IndexError):
                pass  # tuples, or a null struct on the path
        values = [self.values(key) for key in keys]
        return [[row[i] for row in values] for i in range(len(self.columns))]


def _fields(row: Any) -> list[Any]:
    return list(row.values()) if isinstance(row, Mapping) else list(row)


def new_partition(key: Any, partition_key: PartitionKey, m: int) -> int:
    """The partition (of ``m``) that a decoded state key belongs to."""
    return partition_key.partition(key, m)


def _key(
    operator: str,
    family: str,
    schema: StructType,
    path: tuple[str, ...],
    columns: Iterable[int] | None,
    where: str,
) -> PartitionKey:
    ordinals: list[int] = []
    path_keys: list[str] = []
    struct = schema
    for name in path:
        names = struct.names
        if name not in names:
            raise FormatError(
                where,
                f"{operator} {family}: the key has no {name!r} field ({schema.simple_string()})",
            )
        ordinals.append(names.index(name))
        path_keys.append(struct.unique_names()[ordinals[-1]])
        inner = struct.fields[ordinals[-1]].data_type
        if not isinstance(inner, StructType):
            raise FormatError(where, f"{operator} {family}: key field {name!r} is not a struct")
        struct = inner
    cols = tuple(range(len(struct.fields))) if columns is None else tuple(columns)
    prefix = "".join(p + "." for p in path)
    types = tuple(struct.fields[i].data_type for i in cols)
    for i, t in zip(cols, types, strict=True):
        murmur3.check_hashable(
            t, path=where, what=f"{operator} {family} key column {prefix}{struct.fields[i].name}"
        )
    return PartitionKey(
        operator,
        family,
        tuple(ordinals),
        cols,
        tuple(prefix + struct.fields[i].name for i in cols),
        types,
        tuple(path_keys),
        tuple(struct.unique_names()[i] for i in cols),
    )


def _join_key(family: str, schema: StructType, where: str) -> PartitionKey:
    suffix = family.split("-", 1)[1] if family.startswith(("left-", "right-")) else ""
    if suffix not in _JOIN_TRAILING:
        raise FormatError(
            where, f"{JOIN}: unknown join store {family!r}, cannot tell its join keys"
        )
    trailing = _JOIN_TRAILING[suffix]
    n = len(schema.fields)
    if trailing is None:
        return _key(JOIN, family, schema, (), None, where)
    if n < 2 or schema.fields[-1].name != trailing:
        raise FormatError(
            where,
            f"{JOIN} {family}: expected the key to end with {trailing!r}, got "
            f"{schema.simple_string()}",
        )
    return _key(JOIN, family, schema, (), range(n - 1), where)


def _tws_key(
    operator: str, family: str, schema: StructType, map_families: frozenset[str], where: str
) -> PartitionKey:
    role = family_role(family)
    if role.role in ("timers", "timers_index"):
        return _key(operator, family, schema, ("key",), None, where)
    if role.role == "ttl_index":
        # A map variable's TTL entries name (grouping key, user key).
        inner = ("elementKey", "key") if role.variable in map_families else ("elementKey",)
        return _key(operator, family, schema, inner, None, where)
    if role.role in ("list_min_expiry", "list_count", "row_counter"):
        return _key(operator, family, schema, (), None, where)
    if role.role == "variable":
        path = ("key",) if family in map_families else ()
        return _key(operator, family, schema, path, None, where)
    # The store's ``default`` family: transformWithState writes nothing to it.
    raise FormatError(where, f"{operator}: column family {family!r} holds no state ckpt can place")


def partition_key_columns(
    operator: str | None,
    family: str,
    key_schema: StructType,
    *,
    map_families: Iterable[str] = (),
    path: str = "<state>",
) -> PartitionKey:
    """The partitioning columns of the keys of one store or column family.

    ``operator``: Spark's operator name (operator metadata), or None when the checkpoint has
    none (Spark < 4.0: then a join is known by its store names, a session window by its
    key's last column ``sessionStartTime``, and anything else partitions by the whole key,
    as aggregation, dedup and flatMapGroupsWithState do). ``map_families``: the
    transformWithState map-state variables.
    """
    name = operator if operator is not None else _guess_operator(family, key_schema)
    if name in WHOLE_KEY_OPERATORS:
        return _key(name, family, key_schema, (), None, path)
    if name == JOIN:
        return _join_key(family, key_schema, path)
    if name == SESSION_WINDOW:  # Spark's DropLastNFieldsStatePartitionKeyExtractor(1)
        return _key(name, family, key_schema, (), range(len(key_schema.fields) - 1), path)
    if name in TWS_OPERATORS:
        return _tws_key(name, family, key_schema, frozenset(map_families), path)
    raise FormatError(
        path,
        f"operator {name!r} is not supported: ckpt cannot tell which key columns Spark "
        "partitions its state by (supported: " + ", ".join(sorted(SUPPORTED_OPERATORS)) + ")",
    )


def _guess_operator(family: str, key_schema: StructType) -> str:
    if family.split("-", 1)[-1] in _JOIN_TRAILING and family.startswith(("left-", "right-")):
        return JOIN
    last = key_schema.fields[-1] if key_schema.fields else None
    if last is not None and last.name == SESSION_START and len(key_schema.fields) > 1:
        return SESSION_WINDOW
    return AGGREGATION


def schema_partition_keys(
    operator: str | None, store: str, schema: StateSchema, *, path: str
) -> dict[str, PartitionKey]:
    """The partition keys of a store: by column family for a store with several (schema
    v3: transformWithState, joins in state format 3/4), else ``{store: ...}``."""
    families = [cf for cf in schema.column_families if cf.name != DEFAULT_FAMILY]
    if not families:
        return {store: partition_key_columns(operator, store, schema.key, path=path)}
    maps = frozenset(cf.name for cf in families if cf.user_key_encoder_schema is not None)
    return {
        cf.name: partition_key_columns(
            operator,
            cf.name,
            cf.key,
            map_families=maps,
            path=path,
        )
        for cf in families
    }


def operator_name(ckpt: Checkpoint, operator: int) -> str | None:
    """Spark's name of an operator, from its metadata (None before Spark 4.0)."""
    meta = ckpt.operator_metadata(operator)
    if meta is not None:
        return meta.operator_name
    meta_v2 = operator_metadata_v2(ckpt, operator)
    return meta_v2.operator_name if meta_v2 is not None else None


def store_families(ckpt: Checkpoint, operator: int, store: str) -> StateSchema | None:
    """The store's schema at its newest batch, with the families of the earlier schema files
    its operator metadata names (keys of a dropped TTL variable's index stay in the store)."""
    history = operator_history(ckpt, operator)
    schemas = history.schemas(history.newest, store) if history.newest is not None else None
    if schemas is None:
        return store_schema(ckpt, operator, store)
    return schemas.with_earlier_families()


def operator_partition_keys(ckpt: Checkpoint, operator: int) -> dict[str, dict[str, PartitionKey]]:
    """Every store of an operator -> its families (or the store itself) -> partition key."""
    name = operator_name(ckpt, operator)
    path = f"state/{operator}"
    out: dict[str, dict[str, PartitionKey]] = {}
    for store in ckpt.operators[operator].stores:
        schema = store_families(ckpt, operator, store)
        if schema is None:
            raise FormatError(path, f"store {store}: no schema file, the key columns are unknown")
        out[store] = schema_partition_keys(name, store, schema, path=path)
    return out


@dataclass
class KeyPlacer:
    """Raw state keys, as a store holds them, to their new partition.

    ``families``: column family id -> (family, key decoder) for a store with families; for
    one without, the single entry ``None``. ``rows``: family -> (offset of the key's
    UnsafeRow in a raw key, its field count) where the partition columns can be hashed from
    the row's slots without decoding it (flat types, no prefix-scan or Avro encoding).
    """

    keys: dict[str, PartitionKey]
    families: dict[int | None, tuple[str, Callable[[bytes], Any]]] = field(default_factory=dict)
    path: str = "<state>"
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def family(self, raw_key: bytes) -> tuple[str, Callable[[bytes], Any]]:
        cf_id = (
            None if None in self.families else int.from_bytes(raw_key[:2], "little", signed=True)
        )
        entry = self.families.get(cf_id)
        if entry is None:
            raise FormatError(self.path, f"key {raw_key[:16].hex()}: unknown column family {cf_id}")
        return entry

    def decode(self, raw_key: bytes) -> tuple[str, Any]:
        """The family of a raw key and the key decoded."""
        family, decode = self.family(raw_key)
        return family, decode(raw_key)

    def partition(self, raw_key: bytes, m: int) -> int:
        family, key = self.decode(raw_key)
        return self.keys[family].partition(key, m)

    def partitions(self, raw_keys: Sequence[bytes], m: int) -> npt.NDArray[np.int64]:
        """``partition`` of many raw keys (of any families), vectorised per family."""
        if None in self.families:  # one store, no families
            return self._partitions(self.families[None][0], list(raw_keys), m)
        out = np.empty(len(raw_keys), dtype=np.int64)
        by_family: dict[str, list[int]] = {}
        for i, raw in enumerate(raw_keys):
            by_family.setdefault(self.family(raw)[0], []).append(i)
        for family, at in by_family.items():
            out[at] = self._partitions(family, [raw_keys[i] for i in at], m)
        return out

    def _partitions(self, family: str, raws: list[bytes], m: int) -> npt.NDArray[np.int64]:
        pk = self.keys[family]
        if not raws:
            return np.empty(0, dtype=np.int64)
        if family in self.rows and pk.columns:
            start, fields = self.rows[family]
            # RocksDB keys: the encoding version byte before the row must be 0.
            if start == 0 or all(r[start - 1] == 0 for r in raws):
                columns = list(zip(pk.columns, pk.types, strict=True))
                try:
                    hashes = murmur3_columns.hash_unsafe_rows(raws, start, fields, columns)
                    return murmur3_columns.pmod_array(hashes, m)
                except ValueError:
                    pass  # a damaged row: decoding it says what is wrong
        decode = self.family(raws[0])[1]
        return pk.partitions([decode(r) for r in raws], m)


def family_ids(ckpt: Checkpoint, operator: int, store: str, partition: int) -> dict[str, int]:
    """The column family ids of a partition of a store with families (newest zip's
    ``columnFamilyMapping``; ids never change once given); {} without a zip."""
    zips = zips_of(ckpt, operator, store, partition)
    if not zips:
        return {}
    newest = max(zips, key=lambda f: f.version or 0)
    return dict(
        read_zip_metadata(ckpt.storage, newest.path, newest.entry.size).column_family_mapping
    )


def key_placer(
    ckpt: Checkpoint, operator: int, store: str, cf_ids: Mapping[str, int] | None = None
) -> KeyPlacer:
    """The placer of a store's raw keys; ``cf_ids`` (from ``family_ids``) for a store with
    column families."""
    path = f"state/{operator}"
    keys = operator_partition_keys(ckpt, operator)[store]
    if store in keys and len(keys) == 1:
        row_decoder = decoder_for(ckpt, operator, store)
        placer = KeyPlacer(keys, {None: (store, row_decoder.key)}, path)
        provider = ckpt.operators[operator].stores[store].provider
        schema = row_decoder.schema
        # Prefix-scan keys (a RocksDB session window) are not one row: decoded instead.
        plain = type(row_decoder) is RowDecoder and provider in ("hdfs", "rocksdb")
        if schema is not None and plain and _flat(keys[store]):
            placer.rows[store] = (1 if provider == "rocksdb" else 0, len(schema.key.fields))
        return placer
    schema = store_families(ckpt, operator, store)
    assert schema is not None  # operator_partition_keys refuses a store without one
    encoding = encoders.state_encoding(ckpt.conf)
    families: dict[int | None, tuple[str, Callable[[bytes], Any]]] = {}
    for cf in schema.column_families:
        if cf.name not in keys or cf_ids is None or cf.name not in cf_ids:
            continue
        decode = family_reader(ckpt, cf, "value", path=path).decode_key
        families[cf_ids[cf.name]] = (cf.name, _key_row(decode))
    placer = KeyPlacer(keys, families, path)
    for cf in schema.column_families:
        no_prefix = cf.key_encoder.kind == "NoPrefixKeyStateEncoderSpec"
        if cf.name in keys and no_prefix and encoding == "unsaferow" and _flat(keys[cf.name]):
            # [int16 family id][version byte][row]
            placer.rows[cf.name] = (3, len(cf.key.fields))
    return placer


def _flat(pk: PartitionKey) -> bool:
    return not pk.path and all(murmur3_columns.raw_hashable(t) for t in pk.types)


def _key_row(decode: encoders.KeyDecoder) -> Callable[[bytes], Any]:
    def key_row(raw: bytes) -> Any:
        return decode(raw).key

    return key_row
