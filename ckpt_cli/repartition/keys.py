"""Which new partition each state row goes to.

A stateful operator's input is shuffled by ``HashPartitioning(keys, numPartitions)``: a row
goes to ``pmod(Murmur3Hash(keys), numPartitions)`` (``formats.murmur3``), and its state lives
in that partition. Which columns of a *state key* are those shuffle keys depends on the
operator and, for stores with column families, on the family:

==============================================  ==============================================
aggregation (``stateStoreSave``), dedup         the whole key (grouping / dedup columns)
(``dedupe``, ``dedupeWithinWatermark``),
``flatMapGroupsWithState``,
``applyInPandasWithState``
session window                                  the key without its last column, the session
(``sessionWindowStateStoreSaveExec``)           start (``numColsPrefixKey`` grouping columns)
stream-stream join (``symmetricHashJoin``)      the join keys: ``keyToNumValues`` whole,
                                                ``keyWithIndexToValue`` without ``index``,
                                                format 4's ``keyWithTsToValues`` / ``tsWithKey``
                                                without ``__event_time``
transformWithState (``transformWithState*``)    the grouping key: value/list variables and
                                                ``$rowCounter_``/``$min_``/``$count_`` whole,
                                                map variables ``key`` (of ``key, userKey``),
                                                ``$ttl_`` ``elementKey`` (of a map's TTL:
                                                ``elementKey.key``), timers ``key``
==============================================  ==============================================

A key is the decoded row of ``formats.unsaferow`` / ``formats.state_encoders`` (a dict in
key-schema order, or a tuple); ``PartitionKey`` says where in it the shuffle keys sit.
Operators and families not in the table are refused with a ``FormatError`` naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import murmur3
from ckpt_cli.formats import state_encoders as encoders
from ckpt_cli.formats.schema import DataType, StateSchema, StructType
from ckpt_cli.formats.tws import family_role
from ckpt_cli.model import Checkpoint
from ckpt_cli.replay.read import read_zip_metadata, store_schema
from ckpt_cli.replay.source import decoder_for
from ckpt_cli.replay.tws import operator_metadata_v2, zips_of

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
    """

    operator: str
    family: str
    path: tuple[int, ...]
    columns: tuple[int, ...]
    names: tuple[str, ...]  # dotted, for messages and reports
    types: tuple[DataType, ...]

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
        """The partition of ``m`` the shuffle sends the key to."""
        return murmur3.pmod(self.hash(key), m)


def _fields(row: Any) -> list[Any]:
    return list(row.values()) if isinstance(row, Mapping) else list(row)


def new_partition(key: Any, partition_key: PartitionKey, m: int) -> int:
    """The partition (of ``m``) that a decoded state key belongs to."""
    return partition_key.partition(key, m)


def new_partitions(keys: Iterable[Any], partition_key: PartitionKey, m: int) -> list[int]:
    """``new_partition`` of many keys."""
    return [partition_key.partition(key, m) for key in keys]


def _key(
    operator: str,
    family: str,
    schema: StructType,
    path: tuple[str, ...],
    columns: Iterable[int] | None,
    where: str,
) -> PartitionKey:
    ordinals: list[int] = []
    struct = schema
    for name in path:
        names = struct.names
        if name not in names:
            raise FormatError(
                where,
                f"{operator} {family}: the key has no {name!r} field ({schema.simple_string()})",
            )
        ordinals.append(names.index(name))
        inner = struct.fields[ordinals[-1]].data_type
        if not isinstance(inner, StructType):
            raise FormatError(where, f"{operator} {family}: key field {name!r} is not a struct")
        struct = inner
    cols = tuple(range(len(struct.fields))) if columns is None else tuple(columns)
    if not cols:
        raise FormatError(where, f"{operator} {family}: the key has no partitioning columns")
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
    prefix_cols: int = 0,
    map_families: Iterable[str] = (),
    path: str = "<state>",
) -> PartitionKey:
    """The partitioning columns of the keys of one store or column family.

    ``operator``: Spark's operator name (operator metadata), or None when the checkpoint has
    none (Spark < 4.0: then a join is known by its store names, a session window by its
    key's last column ``sessionStartTime``, and anything else partitions by the whole key,
    as aggregation, dedup and flatMapGroupsWithState do). ``prefix_cols``: the store's
    ``numColsPrefixKey``; ``map_families``: the transformWithState map-state variables.
    """
    name = operator if operator is not None else _guess_operator(family, key_schema)
    if name in WHOLE_KEY_OPERATORS:
        return _key(name, family, key_schema, (), None, path)
    if name == JOIN:
        return _join_key(family, key_schema, path)
    if name == SESSION_WINDOW:
        n = len(key_schema.fields)
        cols = prefix_cols if 0 < prefix_cols < n else n - 1
        return _key(name, family, key_schema, (), range(cols), path)
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
    operator: str | None, store: str, schema: StateSchema, *, prefix_cols: int = 0, path: str
) -> dict[str, PartitionKey]:
    """The partition keys of a store: by column family for a store with several (schema
    v3: transformWithState, joins in state format 3/4), else ``{store: ...}``."""
    families = [cf for cf in schema.column_families if cf.name != DEFAULT_FAMILY]
    if not families:
        return {
            store: partition_key_columns(
                operator, store, schema.key, prefix_cols=prefix_cols, path=path
            )
        }
    maps = frozenset(cf.name for cf in families if cf.user_key_encoder_schema is not None)
    return {
        cf.name: partition_key_columns(
            operator,
            cf.name,
            cf.key,
            prefix_cols=cf.key_encoder.num_cols_prefix_key,
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


def operator_partition_keys(ckpt: Checkpoint, operator: int) -> dict[str, dict[str, PartitionKey]]:
    """Every store of an operator -> its families (or the store itself) -> partition key."""
    name = operator_name(ckpt, operator)
    meta = ckpt.operator_metadata(operator)
    prefix = {store: cols for store, cols, _ in meta.stores} if meta is not None else {}
    path = f"state/{operator}"
    out: dict[str, dict[str, PartitionKey]] = {}
    for store in ckpt.operators[operator].stores:
        schema = store_schema(ckpt, operator, store)
        if schema is None:
            raise FormatError(path, f"store {store}: no schema file, the key columns are unknown")
        out[store] = schema_partition_keys(
            name, store, schema, prefix_cols=prefix.get(store, 0), path=path
        )
    return out


@dataclass
class KeyPlacer:
    """Raw state keys, as a store holds them, to their new partition.

    ``families``: column family id -> (family, key decoder) for a store with families; for
    one without, the single entry ``None``.
    """

    keys: dict[str, PartitionKey]
    families: dict[int | None, tuple[str, Callable[[bytes], Any]]] = field(default_factory=dict)
    path: str = "<state>"

    def decode(self, raw_key: bytes) -> tuple[str, Any]:
        """The family of a raw key and the key decoded."""
        cf_id = None
        if None not in self.families:
            cf_id = int.from_bytes(raw_key[:2], "little", signed=True)
        entry = self.families.get(cf_id)
        if entry is None:
            raise FormatError(self.path, f"key {raw_key[:16].hex()}: unknown column family {cf_id}")
        family, decode = entry
        return family, decode(raw_key)

    def partition(self, raw_key: bytes, m: int) -> int:
        family, key = self.decode(raw_key)
        return self.keys[family].partition(key, m)


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
        return KeyPlacer(keys, {None: (store, row_decoder.key)}, path)
    schema = store_schema(ckpt, operator, store)
    assert schema is not None  # operator_partition_keys refuses a store without one
    encoding = encoders.state_encoding(ckpt.conf)
    families: dict[int | None, tuple[str, Callable[[bytes], Any]]] = {}
    for cf in schema.column_families:
        if cf.name not in keys or cf_ids is None or cf.name not in cf_ids:
            continue
        decode = encoders.make_key_decoder(
            cf.key,
            cf.key_encoder,
            column_families=True,
            encoding=encoding,
            path=path,
            key_writers={cf.key_schema_id: cf.key},
        )
        families[cf_ids[cf.name]] = (cf.name, _key_row(decode))
    return KeyPlacer(keys, families, path)


def _key_row(decode: encoders.KeyDecoder) -> Callable[[bytes], Any]:
    def key_row(raw: bytes) -> Any:
        return decode(raw).key

    return key_row
