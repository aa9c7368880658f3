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

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import records
from ckpt_cli.formats import state_encoders as encoders
from ckpt_cli.formats.schema import ColumnFamilySchema, StructType
from ckpt_cli.formats.tws import OperatorMetadataV2, family_role, parse_operator_metadata_v2
from ckpt_cli.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.replay.read import read_zip_metadata, store_schema
from ckpt_cli.replay.rows import json_value

Row = dict[str, Any]


def operator_metadata_v2(ckpt: Checkpoint, operator: int) -> OperatorMetadataV2 | None:
    """The newest ``_metadata/v2/<batchId>`` of an operator, or None (not format v2)."""
    files = [
        f
        for f in ckpt.operators[operator].metadata_files
        if "/_metadata/v2/" in f.path and f.entry.name.isdigit()
    ]
    if not files:
        return None
    newest = max(files, key=lambda f: int(f.entry.name))
    return parse_operator_metadata_v2(newest.path, ckpt.storage.read_bytes(newest.path))


def state_variables(ckpt: Checkpoint, operator: int) -> list[str] | None:
    """The user state variables of a transformWithState operator, or None for others."""
    meta = operator_metadata_v2(ckpt, operator)
    if meta is None or not meta.state_variables:
        return None
    return [v.name for v in meta.user_state_variables]


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

    def row_key_schema(self) -> StructType:
        """The columns of the rows' ``key`` (the grouping key), which ``where`` filters on."""
        if self.kind in ("map", "timers"):
            inner = next((f.data_type for f in self.key_schema.fields if f.name == "key"), None)
            if isinstance(inner, StructType):
                return inner
        if self.kind == "joinSide":
            return StructType(tuple(f for f in self.key_schema.fields if f.name != "index"))
        return self.key_schema

    def family_id(self, ckpt: Checkpoint, zips: list[CheckpointFile], partition: int) -> int | None:
        """The family's id in the newest zip (ids never change once given; changelogs carry
        none), or None when the store has no such family yet."""
        if not zips:
            raise CkptError(
                f"{self.path}/{partition}: no .zip gives the column family ids "
                f"(columnFamilyMapping) that {self.family} needs"
            )
        newest = max(zips, key=lambda f: f.version or 0)
        mapping = read_zip_metadata(ckpt.storage, newest.path, newest.entry.size)
        return mapping.column_family_mapping.get(self.family)

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

    def rows(self, pairs: Iterator[tuple[bytes, bytes]], cf_id: int) -> Iterator[Row]:
        if self.raw:
            for raw_key, raw_value in pairs:
                if int.from_bytes(raw_key[:2], "little", signed=True) == cf_id:
                    yield {"key": raw_key.hex(), "value": raw_value.hex()}
            return
        if self.kind == "map" and not self.flatten:
            # One row per grouping key, its user keys as JSON text (Spark's map key column).
            groups: dict[str, Row] = {}
            for row in self._rows(pairs, cf_id):
                group = groups.setdefault(
                    json.dumps(row["key"], sort_keys=True), {"key": row["key"], "map_value": {}}
                )
                group["map_value"][json.dumps(row["user_map_key"])] = row["user_map_value"]
            yield from groups.values()
            return
        yield from self._rows(pairs, cf_id)

    def _rows(self, pairs: Iterator[tuple[bytes, bytes]], cf_id: int) -> Iterator[Row]:
        for raw_key, raw_value in pairs:
            if int.from_bytes(raw_key[:2], "little", signed=True) != cf_id:
                continue
            entry = self.decode_entry(raw_key, raw_value)
            if entry.bad_checksums:
                self._mismatch(raw_key)
            yield from self.row(json_value(entry.key.key), json_value(list(entry.values)))

    def _mismatch(self, raw_key: bytes) -> None:
        raise CkptError(
            f"{self.path}: row checksum mismatch in column family {self.family}, key "
            f"{raw_key.hex()}"
        )

    def change_rows(
        self, changes: Iterator[tuple[str, bytes, bytes | None]], cf_id: int
    ) -> Iterator[Row]:
        for kind, raw_key, raw_value in changes:
            if kind == records.DELETE and self.checksums:
                raw_key, checksum = encoders.strip_key_checksum(raw_key, path=self.path)
                if not checksum.ok:
                    self._mismatch(raw_key)
            if int.from_bytes(raw_key[:2], "little", signed=True) != cf_id:
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
            for row in self.row(json_value(key), json_value(values)):
                yield {"change_type": change, **row}


def variable_reader(
    ckpt: Checkpoint,
    operator: int,
    store: str,
    *,
    state_var: str | None,
    timers: bool,
    flatten: bool,
) -> VariableReader:
    """The reader of ``state_var`` (or of the registered timers) of a transformWithState
    store; errors name the operator and what it has."""
    meta = operator_metadata_v2(ckpt, operator)
    path = f"state/{operator}"
    names = [v.name for v in meta.user_state_variables] if meta else []
    schema = store_schema(ckpt, operator, store)
    families: dict[str, ColumnFamilySchema] = (
        {cf.name: cf for cf in schema.column_families} if schema else {}
    )
    if timers:
        found = [n for n in families if family_role(n).role == "timers"]
        if not found:
            raise CkptError(f"{path}: the operator registers no timers (timers=True)")
        name, kind = found[0], "timers"
    else:
        # Spark reads user variables only, not the internal families ($ttl_, $rowCounter_...).
        if state_var not in names or state_var not in families:
            raise CkptError(
                f"{path}: no state variable {state_var!r}; the operator has: " + ", ".join(names)
            )
        name = state_var
        var = meta and next((v for v in meta.state_variables if v.name == name), None)
        kind = var.short_kind if var else "value"
    return family_reader(ckpt, families[name], kind, flatten=flatten, path=path)


def family_reader(
    ckpt: Checkpoint,
    cf: ColumnFamilySchema,
    kind: str,
    *,
    flatten: bool = True,
    multi_valued: bool | None = None,
    path: str,
) -> VariableReader:
    """The reader of one column family of a store, in the checkpoint's encoding
    (``multi_valued`` default: the kinds of multi-valued families)."""
    multi = kind in MULTI_VALUED if multi_valued is None else multi_valued
    encoding = encoders.state_encoding(ckpt.conf)
    checksums = encoders.row_checksums(ckpt.conf)
    return VariableReader(
        cf.name,
        kind,
        flatten,
        multi,
        encoders.make_family_decoder(
            cf.key,
            cf.value,
            cf.key_encoder,
            column_families=True,
            multi_valued=multi,
            encoding=encoding,
            checksums=checksums,
            path=path,
            key_writers={cf.key_schema_id: cf.key},
            value_writers={cf.value_schema_id: cf.value},
        ),
        encoders.make_key_decoder(
            cf.key,
            cf.key_encoder,
            column_families=True,
            encoding=encoding,
            path=path,
            key_writers={cf.key_schema_id: cf.key},
        ),
        encoders.make_value_decoder(cf.value, encoding=encoding, path=path),
        checksums,
        path,
        cf.key,
    )


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
