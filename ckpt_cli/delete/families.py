"""Deleting keys from a store whose state is column families: transformWithState, where a
grouping key goes from every family that holds it (or, with a state variable named, from
that variable's families only), and stream-stream joins in state format 4, where a join key
goes from its four families on both sides.

A transformWithState store keeps each state variable in column families of one RocksDB store
(``formats.tws``): the variable's own (a value; a list; a map's entries under (grouping key,
user key)), its TTL index ``$ttl_<v>`` (keyed by expiry, then the grouping key), a list's
``$min_<v>``, ``$count_<v>`` or ``$rowCounter_<v>``, and the timers in two families
(``*_keyToTimestamp`` and the ``*_timestampToKey`` index). A join in state format 4 keeps
each side's rows by (join key, event time) in ``<side>-keyWithTsToValues`` and its index by
event time in ``<side>-tsWithKey``. Where each family keeps the key is Spark's own
partitioning of the state (:mod:`ckpt_cli.state.partition_keys`), so a deleted key leaves no
entry behind that names it: no TTL entry of a value that is gone, no timer that would fire
for it, no index entry of a row that is gone. A dropped variable's TTL index
(``deleteIfExists`` keeps it) is matched too, by the schema file that declared it.

The selection is made on the key's columns (``key.*``: the grouping key, the join key);
with a state variable named also on its values (``value.*``: a value, a list's element, a
map's value), a grouping key matching when one of its values does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.history import operator_history
from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan, plan_version
from ckpt_cli.delete.selection import PartitionMatch, Selection
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.formats.tws import family_role
from ckpt_cli.state.decoders import json_value
from ckpt_cli.state.join_families import MULTI_VALUED_SUFFIXES
from ckpt_cli.state.partition_keys import PartitionKey, operator_partition_keys, store_families
from ckpt_cli.state.target import SelectionError
from ckpt_cli.state.tws import (
    VariableReader,
    family_names,
    family_reader,
    state_variables,
    variable_reader,
    zips_of,
)

TIMER_ROLES = ("timers", "timers_index")


@dataclass(frozen=True)
class _Family:
    name: str
    decode_key: Callable[[bytes], Any]
    place: PartitionKey
    reader: VariableReader


@dataclass(frozen=True)
class FamilyTarget:
    """What a deletion from column families reads and removes: ``families`` (by name), the
    key's columns, and, with a state variable named, that variable's reader (whose values
    ``value.*`` selects on)."""

    operator: int
    families: dict[str, _Family]
    grouping: StructType
    variable: VariableReader | None
    what: str  # for the plan: "every column family", "state variable cnt", "timers"
    label: str = "column_family"  # what an audit row calls the family ("store": a join's)

    def columns(self) -> tuple[StructType, StructType]:
        """The key and value schema a selection is made on."""
        value = self.variable.value_schema if self.variable is not None else None
        return self.grouping, value if value is not None else StructType(())


def tws_target(
    ckpt: Checkpoint, operator: int, last: int, *, state_var: str | None, timers: bool
) -> FamilyTarget:
    """The families a deletion of ``operator``'s keys at batch ``last`` removes from: all of
    them, ``state_var``'s, or the timers'."""
    where = f"state/{operator}"
    names = state_variables(ckpt, operator, last) or []
    if state_var is not None and state_var not in names:
        raise SelectionError(
            f"{where}: no state variable {state_var!r} at batch {last}; the operator has: "
            + ", ".join(names)
        )
    schema = store_families(ckpt, operator, DEFAULT_STORE)
    if schema is None:
        raise CkptError(f"{where}: no state schema file: keys cannot be matched")
    places = operator_partition_keys(ckpt, operator)[DEFAULT_STORE]
    history = operator_history(ckpt, operator)
    era = history.era_at(last)
    schemas = history.schemas(era, DEFAULT_STORE) if era is not None else None
    kinds = {v.name: v.short_kind for e in history.eras for v in e.variables}
    chosen: dict[str, _Family] = {}
    for cf in schema.column_families:
        role = family_role(cf.name)
        if role.role == "default":
            continue
        if timers and role.role not in TIMER_ROLES:
            continue
        if state_var is not None and (role.variable != state_var or role.role in TIMER_ROLES):
            continue
        # A variable's own family decodes as its kind (a list's values are many); the
        # writers decode values stored under an older schema (Avro evolution).
        kind = kinds.get(cf.name, "value") if role.role == "variable" else "value"
        writers = (
            (schemas.key_writers(cf.name), schemas.value_writers(cf.name))
            if schemas is not None and schemas.key_writers(cf.name)
            else None
        )
        reader = family_reader(ckpt, cf, kind, path=where, writers=writers)
        chosen[cf.name] = _Family(cf.name, reader.decode_key, places[cf.name], reader)
    if timers and not chosen:
        raise SelectionError(f"{where}: the operator registers no timers")
    variable = None
    if state_var is not None:
        variable = variable_reader(
            ckpt,
            operator,
            DEFAULT_STORE,
            state_var=state_var,
            timers=False,
            flatten=True,
            batch=last,
        )
    what = (
        "timers"
        if timers
        else f"state variable {state_var}"
        if state_var is not None
        else "every column family"
    )
    return FamilyTarget(operator, chosen, _grouping(schema, places, where), variable, what)


def join_target(ckpt: Checkpoint, operator: int) -> FamilyTarget:
    """The four families of a join in state format 4; its key, the join key (a family's key
    without ``__event_time``)."""
    where = f"state/{operator}"
    schema = store_families(ckpt, operator, DEFAULT_STORE)
    if schema is None:
        raise CkptError(f"{where}: no state schema file: keys cannot be matched")
    places = operator_partition_keys(ckpt, operator)[DEFAULT_STORE]
    chosen: dict[str, _Family] = {}
    grouping = None
    for cf in schema.column_families:
        if cf.name not in places or cf.name == "default":
            continue
        multi = cf.name.endswith(MULTI_VALUED_SUFFIXES)
        reader = family_reader(ckpt, cf, "values", multi_valued=multi, path=where)
        chosen[cf.name] = _Family(cf.name, reader.decode_key, places[cf.name], reader)
        columns = places[cf.name].columns
        grouping = StructType(tuple(cf.key.fields[i] for i in columns))
    if grouping is None:
        raise CkptError(f"{where}: the join's schema file has no families")
    return FamilyTarget(operator, chosen, grouping, None, "both sides", label="store")


def _grouping(schema: StateSchema, places: dict[str, PartitionKey], where: str) -> StructType:
    """The grouping key's schema: the struct a state variable's own family keys by."""
    for cf in schema.column_families:
        if family_role(cf.name).role != "variable" or cf.name not in places:
            continue
        struct: Any = cf.key
        for ordinal in places[cf.name].path:
            struct = struct.fields[ordinal].data_type
        if isinstance(struct, StructType):
            return struct
    raise CkptError(f"{where}: the schema file declares no state variable: no grouping key")


def match_partition(
    ckpt: Checkpoint, target: FamilyTarget, last: int, out: PartitionMatch, select: Selection
) -> PartitionMatch:
    """The keys of ``target``'s families in ``out``'s partition at batch ``last`` that
    ``select`` matches, and every record of them in those families, into ``out``."""
    partition = out.partition
    version = plan_version(ckpt, target.operator, partition, last + 1)
    families = _families_by_id(ckpt, target, version)
    matched: set[str] | None = None
    if not select.keys_only:
        matched = _matched_by_values(ckpt, target, version, families, select)
    seen: set[str] = set()
    tested: dict[str, bool] = {}
    for raw_key, raw_value, family, key, group in _records(ckpt, version, families):
        gid = json.dumps(group, sort_keys=True, default=str)
        seen.add(gid)
        if matched is not None:
            hit = gid in matched
        elif gid in tested:
            hit = tested[gid]
        else:
            hit = tested[gid] = select.matches({"partition_id": partition, "key": group})
        if hit:
            row = _audit_row(partition, target.label, family, key, group, raw_key, raw_value)
            out.remove(DEFAULT_STORE, raw_key, raw_value, row)
    out.keys = len(seen)
    out.matched = len(matched) if matched is not None else sum(tested.values())
    return out


def _families_by_id(
    ckpt: Checkpoint, target: FamilyTarget, version: ReplayPlan
) -> Callable[[int], _Family | None]:
    """Column family id -> the target's family (None: a family the deletion leaves alone).
    The ids come from the partition's zips, read when the first record asks."""
    names: dict[int, str] | None = None
    path = f"state/{target.operator}/{version.partition}"

    def family(cf_id: int) -> _Family | None:
        nonlocal names
        if names is None:
            zips = zips_of(ckpt, target.operator, DEFAULT_STORE, version.partition)
            span = (version.version, version.version)
            names = family_names(ckpt, zips, span, path=path, needed_by="a key deletion")
        name = names.get(cf_id)
        if name is None:
            raise CkptError(
                f"{path}: records of column family id {cf_id}, which no .zip's "
                "columnFamilyMapping names: their keys cannot be matched"
            )
        return target.families.get(name)

    return family


def _records(
    ckpt: Checkpoint, version: ReplayPlan, families: Callable[[int], _Family | None]
) -> Iterator[tuple[bytes, bytes, _Family, Any, Any]]:
    """The records of the target's families: raw key and value, family, decoded key, and
    its grouping key (JSON)."""
    known: dict[int, _Family | None] = {}
    for raw_key, raw_value in iter_state(ckpt, version):
        cf_id = int.from_bytes(raw_key[:2], "little", signed=True)
        family = known[cf_id] if cf_id in known else known.setdefault(cf_id, families(cf_id))
        if family is None:
            continue
        key = family.decode_key(raw_key).key
        place = family.place
        group = dict(zip(place.column_keys, place.values(key), strict=True))
        yield raw_key, raw_value, family, key, json_value(group)


def _matched_by_values(
    ckpt: Checkpoint,
    target: FamilyTarget,
    version: ReplayPlan,
    families: Callable[[int], _Family | None],
    select: Selection,
) -> set[str]:
    """The grouping keys one of whose values of the named variable matches ``select``."""
    variable = target.variable
    assert variable is not None
    found: set[str] = set()
    for raw_key, raw_value, family, _key, group in _records(ckpt, version, families):
        if family.name != variable.family:
            continue
        gid = json.dumps(group, sort_keys=True, default=str)
        if gid in found:
            continue
        entry = variable.decode_entry(raw_key, raw_value)
        for value in json_value(list(entry.values)):
            row = {"partition_id": version.partition, "key": group, "value": value}
            if select.matches(row):
                found.add(gid)
                break
    return found


def _audit_row(
    partition: int,
    label: str,
    family: _Family,
    key: Any,
    group: Any,
    raw_key: bytes,
    raw_value: bytes,
) -> dict[str, Any]:
    """A removed record as the audit file shows it: its grouping key, the family and, where
    the family keys by more than the grouping key (a map's user key, an expiry), the whole
    key; its value decoded."""
    row: dict[str, Any] = {"partition_id": partition, label: family.name, "key": group}
    whole = json_value(key)
    if whole != group:
        row["family_key"] = whole
    entry = family.reader.decode_entry(raw_key, raw_value)
    values = json_value(list(entry.values))
    if values and not all(_placeholder(v) for v in values):
        row["value"] = values[0] if len(values) == 1 else values
    return row


def _placeholder(value: Any) -> bool:
    """Spark's value of a family that keeps keys only (timers, TTL entries): one null field
    ``__dummy__`` or ``__empty__``."""
    return isinstance(value, dict) and list(value) in (["__dummy__"], ["__empty__"])
