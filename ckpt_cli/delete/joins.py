"""Deleting keys from a stream-stream join: state formats 1 and 2 (four stores per
partition), and 3 (the same four as column families of one store).

Each side keeps ``<side>-keyToNumValues`` (join key -> how many rows the side buffers for
it) and ``<side>-keyWithIndexToValue`` ((join key, index) -> one buffered row), Spark's
``SymmetricHashJoinStateManager``. A deleted join key goes from all four stores together,
its count and every indexed row on both sides, so no store names rows another lacks: the
restarted query joins new rows of the key only with new rows, as if it had never seen it.
The selection is made on the count stores' rows (``key.*``: the join key columns,
``field0``...; ``value.value``: the count), on either side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint, Operator
from ckpt_cli.core.read import iter_state, store_schema
from ckpt_cli.core.rebuild import ReplayPlan, plan_version
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.delete.selection import PartitionMatch, Selection
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import ColumnFamilySchema
from ckpt_cli.state.decoders import json_value
from ckpt_cli.state.join_families import JoinFamily, join_family_reader, join_format
from ckpt_cli.state.reader import decoder_for
from ckpt_cli.state.tws import VariableReader, zips_of

SIDES = ("left", "right")
COUNTS = tuple(f"{side}-keyToNumValues" for side in SIDES)
INDEXED = tuple(f"{side}-keyWithIndexToValue" for side in SIDES)
STORES = (COUNTS[0], INDEXED[0], COUNTS[1], INDEXED[1])  # Spark's order (commit log ids)


def is_join(op: Operator) -> bool:
    """A stream-stream join of state format 1 or 2 (its four stores)."""
    return set(op.stores) == set(STORES)


def _join_key(key: Any, indexed: bool) -> str:
    """A join key as text: an indexed store's key without its trailing ``index``."""
    items = list(key.items())
    return json.dumps(items[:-1] if indexed else items, sort_keys=True, default=str)


class JoinMatcher:
    """The join keys of ``operator`` at batch ``last`` whose count row on either side a
    selection matches, and every record of them in the four stores (or, state format 3,
    column families), one partition at a time."""

    def __init__(self, ckpt: Checkpoint, operator: int, last: int) -> None:
        self.ckpt, self.operator, self.last = ckpt, operator, last
        self.families = join_format(ckpt, operator) == 3
        if self.families:
            self.readers = {
                name: join_family_reader(ckpt, JoinFamily(operator, name, False)) for name in STORES
            }
            store = ckpt.operators[operator].stores[DEFAULT_STORE]
        else:
            self.decoders = {store: decoder_for(ckpt, operator, store) for store in STORES}
            store = ckpt.operators[operator].stores[COUNTS[0]]
        self.partitions = batch_partitions(ckpt, store)

    def match(self, out: PartitionMatch, select: Selection) -> PartitionMatch:
        """Fill ``out`` with its partition's matches."""
        if self.families:
            return self._match_families(out, select)
        ckpt, operator, last, partition = self.ckpt, self.operator, self.last, out.partition
        seen: set[str] = set()
        matched: set[str] = set()
        for store in COUNTS:
            decoder = self.decoders[store]
            version = plan_version(ckpt, operator, partition, last + 1, store=store)
            for key, value in iter_state(ckpt, version):
                json_key = decoder.json_key(key)
                seen.add(_join_key(json_key, False))
                if select.keys_only:
                    row = {"partition_id": partition, "key": json_key}
                else:
                    row = decoder.row(partition, key, value)
                if select.test(row):
                    matched.add(_join_key(json_key, False))
        if matched:
            for store in STORES:
                decoder = self.decoders[store]
                version = plan_version(ckpt, operator, partition, last + 1, store=store)
                for key, value in iter_state(ckpt, version):
                    if _join_key(decoder.json_key(key), store in INDEXED) in matched:
                        row = {"store": store, **decoder.row(partition, key, value)}
                        out.remove(store, key, value, row)
        out.keys, out.matched = len(seen), len(matched)
        return out

    def _match_families(self, out: PartitionMatch, select: Selection) -> PartitionMatch:
        """A join in state format 3: its four stores are column families of the one
        ``default`` store (the 2-byte family id before each key, ids from the zips'
        ``columnFamilyMapping``), whose removed keys are all ``default``'s."""
        ckpt, last, readers, partition = self.ckpt, self.last, self.readers, out.partition
        version = plan_version(ckpt, self.operator, partition, last + 1)
        zips = zips_of(ckpt, self.operator, DEFAULT_STORE, partition)
        names = {
            cf_id: name
            for name, reader in readers.items()
            for cf_id in reader.family_ids(ckpt, zips, partition, (last + 1, last + 1))
        }
        seen: set[str] = set()
        matched: set[str] = set()
        for name, _, _, row in _entries(ckpt, version, names, readers):
            if name in COUNTS:
                seen.add(_join_key(row["key"], False))
                if select.matches(row):
                    matched.add(_join_key(row["key"], False))
        if matched:
            for name, raw_key, raw_value, row in _entries(ckpt, version, names, readers):
                if _join_key(row["key"], name in INDEXED) in matched:
                    out.remove(DEFAULT_STORE, raw_key, raw_value, {"store": name, **row})
        out.keys, out.matched = len(seen), len(matched)
        return out


def count_family_columns(ckpt: Checkpoint, operator: int) -> tuple[StructType, StructType]:
    """The key and value schema of a format-3 join's ``left-keyToNumValues`` family, which a
    selection is made on."""
    cf = _families(ckpt, operator)[COUNTS[0]]
    return cf.key, cf.value


def _families(ckpt: Checkpoint, operator: int) -> dict[str, ColumnFamilySchema]:
    schema = store_schema(ckpt, operator, DEFAULT_STORE)
    found = {cf.name: cf for cf in (schema.column_families if schema else ())}
    missing = [name for name in STORES if name not in found]
    if missing:
        raise CkptError(
            f"state/{operator}/_stateSchema: the join's schema file has no family "
            f"{', '.join(missing)}"
        )
    return found


def _entries(
    ckpt: Checkpoint,
    version: ReplayPlan,
    names: dict[int, str],
    readers: dict[str, VariableReader],
) -> Iterator[tuple[str, bytes, bytes, dict[str, Any]]]:
    """The records of the join's families in ``version``: family, raw key and value, row."""
    for raw_key, raw_value in iter_state(ckpt, version):
        name = names.get(int.from_bytes(raw_key[:2], "little", signed=True))
        if name is None:
            continue
        entry = readers[name].decode_entry(raw_key, raw_value)
        value = json_value(entry.values[0]) if entry.values else None
        key = json_value(entry.key.key)
        yield (
            name,
            raw_key,
            raw_value,
            {"partition_id": version.partition, "key": key, "value": value},
        )
