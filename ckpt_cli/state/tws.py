"""transformWithState stores in replay: one state variable (or the registered timers) of a
RocksDB store with column families, in the row shapes of Spark's ``statestore`` source with
``stateVarName`` / ``readRegisteredTimers`` / ``flattenCollectionTypes``.

The families' schemas come from the schema file v3 in the checkpoint's own ``_stateSchema``
directory (operator metadata v2 may name an absolute path where Spark ran); the family ids
from the ``columnFamilyMapping`` of the partition's zips; the bytes are decoded with
``formats.state_encoders`` in the encoding of the offsets' conf.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.history import (
    MetadataEra,
    OperatorHistory,
    describe_batches,
    operator_history,
)
from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.read import read_zip_metadata, store_schema
from ckpt_cli.errors import CkptError
from ckpt_cli.formats import records
from ckpt_cli.formats import state_encoders as encoders
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import ColumnFamilySchema
from ckpt_cli.formats.tws import TIMER_STATE, OperatorMetadataV2, family_role
from ckpt_cli.formats.unsaferow import row_layout_problem
from ckpt_cli.state.decoders import json_value
from ckpt_cli.state.target import SelectionError

Row = dict[str, Any]


def operator_metadata_v2(
    ckpt: Checkpoint, operator: int, batch: int | None = None
) -> OperatorMetadataV2 | None:
    """The ``_metadata/v2/<batchId>`` Spark reads ``batch`` with (the newest at or below it;
    without ``batch`` the newest), or None (not format v2)."""
    era = operator_history(ckpt, operator).era_at(batch)
    return era.metadata if era is not None else None


def state_variables(ckpt: Checkpoint, operator: int, batch: int | None = None) -> list[str] | None:
    """The user state variables of a transformWithState operator at ``batch`` (default: the
    newest metadata's), or None for others."""
    history = operator_history(ckpt, operator)
    if not any(e.metadata.state_variables for e in history.eras):
        return None
    meta = operator_metadata_v2(ckpt, operator, batch)
    return [v.name for v in meta.user_state_variables] if meta else []


def registers_timers(ckpt: Checkpoint, operator: int, batch: int | None = None) -> bool:
    """Whether the operator metadata of ``batch`` declares timers (a ``TimerState``
    variable: ProcessingTime or EventTime mode; TimeMode None has none)."""
    meta = operator_metadata_v2(ckpt, operator, batch)
    return meta is not None and any(v.kind == TIMER_STATE for v in meta.state_variables)


MULTI_VALUED = ("list", "values")


@dataclass
class VariableReader:
    """Decodes one family of a transformWithState store into Spark's rows."""

    family: str
    # value, list, map or timers; a join's families (formats 3 and 4): values (one row per
    # value of a multi-valued family) or joinSide (keyWithIndexToValue as Spark's joinSide)
    kind: str
    flatten: bool
    multi_valued: bool  # several values per key (list state, format 4's join families)
    decode_entry: Callable[[bytes, bytes], Any]
    decode_key: Callable[[bytes], Any]
    decode_value: Callable[[bytes], Any]
    checksums: bool
    path: str
    key_schema: StructType  # the family's key
    raw: bool = False  # the family's records as stored, hex, undecoded
    value_schema: StructType | None = None  # the family's value, as rows come out in
    encoding: str = "unsaferow"

    def row_key_schema(self) -> StructType:
        """The columns of the rows' ``key`` (the grouping key), which ``where`` filters on."""
        if self.kind in ("map", "timers"):
            inner = next((f.data_type for f in self.key_schema.fields if f.name == "key"), None)
            if isinstance(inner, StructType):
                return inner
        if self.kind == "joinSide":
            return StructType(tuple(f for f in self.key_schema.fields if f.name != "index"))
        return self.key_schema

    def family_ids(
        self,
        ckpt: Checkpoint,
        zips: list[CheckpointFile],
        partition: int,
        versions: tuple[int, int] | None = None,
    ) -> frozenset[int]:
        """The ids the family had in the store (empty: it has none yet), from the zips'
        ``columnFamilyMapping`` (changelogs carry none). Spark never gives an id twice
        (``maxColumnFamilyId`` only grows, a dropped family's keys are deleted), so every id
        a zip around ``versions`` (first, last store version read; None: the newest zip)
        maps to the name is the family's: the zip at or below the first, every zip up to the
        first above the last (a family added after the base zip, or dropped later)."""
        return family_ids(ckpt, zips, self.family, versions, path=f"{self.path}/{partition}")

    def arrow_schema(self, change_feed: bool = False) -> Any:
        """The ``pyarrow.Schema`` of the rows (``partition_id`` first; a change feed's
        ``batch_id``, ``partition_id``, ``change_type``), from the family's schemas in force
        at the read's batch: rows of an older schema, their new fields null, share it. None
        for raw rows or a type with no Arrow form here (the types are then inferred)."""
        import pyarrow as pa

        from ckpt_cli.state.decoders import json_arrow_type

        if self.raw or self.value_schema is None:
            return None
        key = json_arrow_type(self.row_key_schema())
        value = json_arrow_type(self.value_schema)
        by_name = {f.name: f.data_type for f in self.key_schema.fields}
        columns: list[tuple[str, Any]]
        if self.kind == "timers":
            columns = [("key", key), ("expiration_timestamp_ms", pa.int64())]
        elif self.kind == "map" and "userKey" in by_name:
            user_key = json_arrow_type(by_name["userKey"])
            if self.flatten:
                columns = [("key", key), ("user_map_key", user_key), ("user_map_value", value)]
            else:
                # The user keys as JSON text (Spark's map key column of struct keys).
                map_type = None if value is None else pa.map_(pa.string(), value)
                columns = [("key", key), ("map_value", map_type)]
        elif self.kind == "list" and self.flatten:
            columns = [("key", key), ("list_element", value)]
        elif self.kind == "list":
            columns = [("key", key), ("list_value", None if value is None else pa.list_(value))]
        elif self.kind == "joinSide":
            if value is not None:
                value = pa.struct([f for f in value if f.name != "matched"])
            columns = [("key", key), ("value", value)]
        else:
            columns = [("key", key), ("value", value)]
        head = [("partition_id", pa.int64())]
        if change_feed:
            head = [("batch_id", pa.int64()), *head, ("change_type", pa.string())]
        if any(t is None for _name, t in columns):
            return None
        return pa.schema(head + columns)

    def row(self, key: Any, values: list[Any]) -> Iterator[Row]:
        if self.kind == "timers":
            yield {"key": key["key"], "expiration_timestamp_ms": key["expiryTimestampMs"]}
        elif self.kind == "map":
            for value in values:
                yield {"key": key["key"], "user_map_key": key["userKey"], "user_map_value": value}
        elif self.kind == "list" and self.flatten:
            for value in values:
                yield {"key": key, "list_element": value}
        elif self.kind == "list":
            yield {"key": key, "list_value": values}
        elif self.kind == "joinSide":
            for value in values:
                yield {
                    "key": {k: x for k, x in key.items() if k != "index"},
                    "value": value and {k: x for k, x in value.items() if k != "matched"},
                }
        else:
            for value in values:
                yield {"key": key, "value": value}

    def rows(self, pairs: Iterator[tuple[bytes, bytes]], cf_ids: frozenset[int]) -> Iterator[Row]:
        if self.raw:
            for raw_key, raw_value in pairs:
                if int.from_bytes(raw_key[:2], "little", signed=True) in cf_ids:
                    yield {"key": raw_key.hex(), "value": raw_value.hex()}
            return
        if self.kind == "map" and not self.flatten:
            # One row per grouping key, its user keys as JSON text (Spark's map key column).
            groups: dict[str, Row] = {}
            for row in self._rows(pairs, cf_ids):
                group = groups.setdefault(
                    json.dumps(row["key"], sort_keys=True), {"key": row["key"], "map_value": {}}
                )
                group["map_value"][json.dumps(row["user_map_key"])] = row["user_map_value"]
            yield from groups.values()
            return
        yield from self._rows(pairs, cf_ids)

    def _rows(self, pairs: Iterator[tuple[bytes, bytes]], cf_ids: frozenset[int]) -> Iterator[Row]:
        for raw_key, raw_value in pairs:
            if int.from_bytes(raw_key[:2], "little", signed=True) not in cf_ids:
                continue
            entry = self.decode_entry(raw_key, raw_value)
            if entry.bad_checksums:
                self._mismatch(raw_key)
            yield from self.row(json_value(entry.key.key), json_value(list(entry.values)))

    def layout_problems(
        self, pairs: Iterator[tuple[bytes, bytes]], cf_ids: frozenset[int], limit: int
    ) -> Iterator[tuple[Any, str | None]]:
        """Per row of the family (at most ``limit``): its key and what about its stored
        value rows does not fit ``value_schema`` (None: it fits). UnsafeRow encoding only:
        Avro values carry the id of the schema they were written with."""
        assert self.value_schema is not None and self.encoding == "unsaferow"
        seen = 0
        for raw_key, raw_value in pairs:
            if int.from_bytes(raw_key[:2], "little", signed=True) not in cf_ids:
                continue
            if seen >= limit:
                return
            seen += 1
            if self.multi_valued:
                elements = encoders.split_list_value(
                    raw_value, key=raw_key, checksums=self.checksums, path=self.path
                )
                rows = [e.data for e in elements]
            elif self.checksums:
                rows = [encoders.strip_value_checksum(raw_key, raw_value, path=self.path)[0]]
            else:
                rows = [raw_value]
            problem = None
            for row in rows:
                body = encoders.strip_version(row, path=self.path, what="value")
                problem = row_layout_problem(self.value_schema, body)
                if problem is not None:
                    break
            yield json_value(self.decode_key(raw_key).key), problem

    def _mismatch(self, raw_key: bytes) -> None:
        raise CkptError(
            f"{self.path}: row checksum mismatch in column family {self.family}, key "
            f"{raw_key.hex()}"
        )

    def change_rows(
        self, changes: Iterator[tuple[str, bytes, bytes | None]], cf_ids: frozenset[int]
    ) -> Iterator[Row]:
        for kind, raw_key, raw_value in changes:
            if kind == records.DELETE and self.checksums:
                raw_key, checksum = encoders.strip_key_checksum(raw_key, path=self.path)
                if not checksum.ok:
                    self._mismatch(raw_key)
            if int.from_bytes(raw_key[:2], "little", signed=True) not in cf_ids:
                continue
            change = {records.PUT: "update", records.MERGE: "append"}.get(kind, kind)
            if self.raw:
                hex_value = None if raw_value is None else raw_value.hex()
                yield {"change_type": change, "key": raw_key.hex(), "value": hex_value}
                continue
            key = self.decode_key(raw_key).key
            values: list[Any] = [None]
            if raw_value is not None and self.multi_valued:
                elements = encoders.split_list_value(
                    raw_value, key=raw_key, checksums=self.checksums, path=self.path
                )
                if any(e.checksum is not None and not e.checksum.ok for e in elements):
                    self._mismatch(raw_key)
                values = [self.decode_value(e.data) for e in elements]
            elif raw_value is not None:
                if self.checksums:
                    raw_value, checksum = encoders.strip_value_checksum(
                        raw_key, raw_value, path=self.path
                    )
                    if not checksum.ok:
                        self._mismatch(raw_key)
                values = [self.decode_value(raw_value)]
            for i, row in enumerate(self.row(json_value(key), json_value(values))):
                # Spark's change feed gives a multi-valued record's first value the record's
                # type and each further one ``append`` (RocksDBStateStoreChangeDataReader:
                # pendingValues are MERGE_RECORDs): a put of a whole list is one update and
                # appends.
                label = "append" if i and self.multi_valued and self.flatten else change
                yield {"change_type": label, **row}


def variable_reader(
    ckpt: Checkpoint,
    operator: int,
    store: str,
    *,
    state_var: str | None,
    timers: bool,
    flatten: bool,
    batch: int | None = None,
    change_feed: bool = False,
) -> VariableReader:
    """The reader of ``state_var`` (or of the registered timers) of a transformWithState
    store at ``batch`` (a change feed: its end batch; None: the newest metadata), with the
    operator metadata and schema files Spark reads that batch with (``replay.history``);
    errors name the operator and what it has, and where a variable exists when not there."""
    history = operator_history(ckpt, operator)
    era = history.era_at(batch)
    path = f"state/{operator}"
    schemas = history.schemas(era, store) if era is not None else None
    if schemas is not None:
        families = {cf.name: cf for cf in schemas.active.column_families}
    else:
        schema = store_schema(ckpt, operator, store)
        families = {cf.name: cf for cf in schema.column_families} if schema else {}
    names = [v.name for v in era.variables] if era else []
    if timers:
        found = [n for n in families if family_role(n).role == "timers"]
        if not found:
            raise CkptError(f"{path}: the operator registers no timers (timers=True)")
        name, kind = found[0], "timers"
    else:
        # Spark reads user variables only, not the internal families ($ttl_, $rowCounter_...).
        if state_var not in names or state_var not in families:
            raise _not_defined(ckpt, history, era, state_var, names, batch, path, change_feed)
        name = state_var
        var = era.variable(name) if era else None
        kind = var.short_kind if var else "value"
    writers = (
        (schemas.key_writers(name), schemas.value_writers(name)) if schemas is not None else None
    )
    return family_reader(ckpt, families[name], kind, flatten=flatten, path=path, writers=writers)


def _not_defined(
    ckpt: Checkpoint,
    history: OperatorHistory,
    era: MetadataEra | None,
    state_var: str | None,
    names: list[str],
    batch: int | None,
    path: str,
    change_feed: bool = False,
) -> SelectionError:
    """Spark's refusal of a variable its batch's operator metadata does not declare
    (``State variable X is not defined``), saying which batches do have it."""
    has = ", ".join(names)
    if era is None or batch is None:
        return SelectionError(f"{path}: no state variable {state_var!r}; the operator has: {has}")
    where = history.batches_with(state_var or "", ckpt.batches.commits)
    elsewhere = (
        f"it exists at batches {describe_batches(where)}"
        if where
        else "no operator metadata of a committed batch declares it"
    )
    # Spark reads a change feed with the operator metadata of its end batch.
    end = "the change feed's end; " if change_feed else ""
    return SelectionError(
        f"{path}: no state variable {state_var!r} at batch {batch} ({end}{era.path} has: {has}); "
        + elsewhere
    )


def family_reader(
    ckpt: Checkpoint,
    cf: ColumnFamilySchema,
    kind: str,
    *,
    flatten: bool = True,
    multi_valued: bool | None = None,
    path: str,
    writers: tuple[dict[int, StructType], dict[int, StructType]] | None = None,
) -> VariableReader:
    """The reader of one column family of a store, in the checkpoint's encoding
    (``multi_valued`` default: the kinds of multi-valued families). ``writers``: (key, value)
    schema id -> the schema a row with that id was written with (Avro; default: the
    family's own ids only); rows of an older schema come out in ``cf``'s."""
    multi = kind in MULTI_VALUED if multi_valued is None else multi_valued
    encoding = encoders.state_encoding(ckpt.conf)
    checksums = encoders.row_checksums(ckpt.conf)
    key_writers, value_writers = writers or (
        {cf.key_schema_id: cf.key},
        {cf.value_schema_id: cf.value},
    )
    keys = encoders.make_key_decoder(
        cf.key,
        cf.key_encoder,
        column_families=True,
        encoding=encoding,
        path=path,
        key_writers=key_writers,
    )
    values = encoders.make_value_decoder(
        cf.value, encoding=encoding, path=path, value_writers=value_writers
    )
    return VariableReader(
        cf.name,
        kind,
        flatten,
        multi,
        encoders.entry_decoder(keys, values, multi_valued=multi, checksums=checksums, path=path),
        keys,
        values,
        checksums,
        path,
        cf.key,
        value_schema=cf.value,
        encoding=encoding,
    )


def family_ids(
    ckpt: Checkpoint,
    zips: list[CheckpointFile],
    family: str,
    versions: tuple[int, int] | None,
    *,
    path: str,
) -> frozenset[int]:
    """``VariableReader.family_ids``."""
    names = family_names(ckpt, zips, versions, path=path, needed_by=family)
    return frozenset(cf_id for cf_id, name in names.items() if name == family)


def family_names(
    ckpt: Checkpoint,
    zips: list[CheckpointFile],
    versions: tuple[int, int] | None,
    *,
    path: str,
    needed_by: str = "a column family",
) -> dict[int, str]:
    """Column family id -> name, from the ``columnFamilyMapping`` of the zips around
    ``versions`` (as :meth:`VariableReader.family_ids` chooses them)."""
    if not zips:
        raise CkptError(
            f"{path}: no .zip gives the column family ids (columnFamilyMapping) that "
            f"{needed_by} needs"
        )
    ordered = sorted(zips, key=lambda f: f.version or 0)
    if versions is None:
        chosen = ordered[-1:]
    else:
        first, last = versions
        below = [f for f in ordered if (f.version or 0) <= first]
        above = [f for f in ordered if (f.version or 0) > last]
        between = [f for f in ordered if first < (f.version or 0) <= last]
        chosen = below[-1:] + between + above[:1]
        if not chosen:
            chosen = ordered[-1:]
    names: dict[int, str] = {}
    for f in chosen:
        mapping = read_zip_metadata(ckpt.storage, f.path, f.entry.size).column_family_mapping
        for name, cf_id in mapping.items():
            names[cf_id] = name
    return names


def zips_of(ckpt: Checkpoint, operator: int, store: str, partition: int) -> list[CheckpointFile]:
    part = ckpt.operators[operator].stores[store].partitions[partition]
    return [f for f in part.files if f.kind is FileKind.ZIP]


def list_families(ckpt: Checkpoint, op_id: int) -> list[str]:
    """The column families whose values are lists (elements joined by Spark's merge operator):
    ListState variables and join format 4's multi-valued families; a writer must join their
    elements as Spark does, not as another RocksDB merged them."""
    meta = operator_metadata_v2(ckpt, op_id)
    names = [v.name for v in meta.state_variables if v.short_kind in MULTI_VALUED] if meta else []
    return names + list(encoders.MULTI_VALUED_JOIN_FAMILIES)
