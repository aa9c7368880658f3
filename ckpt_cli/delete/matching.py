"""Which keys a deletion removes, one store partition at a time: :class:`Matcher`, built once
per process from a :class:`MatchSpec` (plain data, so an engine's task builds its own), with
the refusals of what ckpt cannot delete.

A key is the operator's own state key: the grouping key of aggregations, deduplication and
flatMapGroupsWithState; the session key of session windows, every session of it; the join
key of a stream-stream join in state format 1-3, from its four stores (or column families)
together (:mod:`ckpt_cli.delete.joins`); the grouping key of transformWithState in every
column family that holds it, or in one state variable's or the timers'; the join key of a
join in state format 4 from its four families (:mod:`ckpt_cli.delete.families`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint, Store
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan, plan_version
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.delete.families import FamilyTarget, join_target, match_partition, tws_target
from ckpt_cli.delete.joins import COUNTS, STORES, JoinMatcher, count_family_columns, is_join
from ckpt_cli.delete.raw_keys import RawKeys
from ckpt_cli.delete.selection import PartitionMatch, RowOf, Selection
from ckpt_cli.errors import CkptError, UsageError
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.formats.unsaferow import flat_row_encoder
from ckpt_cli.state.bulk import packed_batches
from ckpt_cli.state.decoders import RowDecoder
from ckpt_cli.state.join_families import join_format
from ckpt_cli.state.reader import decoder_for, prefix_key_columns
from ckpt_cli.state.where import Where, parse_where, schema_columns


class DeleteRefused(CkptError, code="DELETE_REFUSED"):
    """``ckpt state delete`` will not run on this checkpoint (the message says why)."""


@dataclass(frozen=True)
class MatchSpec:
    """A deletion's choice of keys, as given: ``operator`` at batch ``last``, ``where`` or
    ``keys``; of transformWithState, ``state_var`` or ``timers`` only."""

    operator: int
    last: int
    where: str | None = None
    keys: tuple[dict[str, Any], ...] | None = None
    state_var: str | None = None
    timers: bool = False


class Matcher:
    """One deletion's matching: its store, what a key is, the selection, and
    :meth:`match` of one partition."""

    def __init__(self, ckpt: Checkpoint, spec: MatchSpec) -> None:
        self.ckpt, self.spec = ckpt, spec
        operator, last = spec.operator, spec.last
        # Read once: each call reads the operator metadata again.
        join_version = join_format(ckpt, operator) if operator in ckpt.operators else None
        self.store = _store(ckpt, operator, join_version)
        # transformWithState: operator metadata v2 that is not a join's.
        self.tws = bool(ckpt.operators[operator].metadata_v2_files) and join_version is None
        if (spec.state_var is not None or spec.timers) and not self.tws:
            flag = "--state-var" if spec.state_var is not None else "--timers"
            raise UsageError(f"state/{operator}: {flag} is for a transformWithState operator")
        if spec.state_var is not None and spec.timers:
            raise UsageError("--state-var and --timers: name one of them")
        families = join_version == 3
        self.join = (
            JoinMatcher(ckpt, operator, last)
            if families or is_join(ckpt.operators[operator])
            else None
        )
        self.target: FamilyTarget | None = None
        if self.tws:
            self.target = tws_target(
                ckpt, operator, last, state_var=spec.state_var, timers=spec.timers
            )
        elif join_version == 4:
            self.target = join_target(ckpt, operator)
        self.decoder: RowDecoder | None = None
        if self.target is not None:
            columns = schema_columns(*self.target.columns())
        elif families:
            columns = schema_columns(*count_family_columns(ckpt, operator))
        else:
            store = COUNTS[0] if self.join is not None else self.store.name
            self.decoder = decoder_for(ckpt, operator, store)
            schema = self.decoder.schema
            if schema is None:
                raise DeleteRefused(
                    f"state/{operator}: no state schema file: keys cannot be matched"
                )
            columns = schema_columns(schema.key, schema.value)
        test = _selection(spec.where, list(spec.keys) if spec.keys is not None else None, columns)
        # Keys alone are decoded while matching when the selection reads no value (--keys, a
        # --where on key columns): the value of a matched row only (a third of the time at
        # 1M).
        keys_only = not isinstance(test, Where) or "value" not in test.sides
        self.select = Selection(test, keys_only)
        # Session windows: a state key is (session key, session start), and deleting a key
        # means every session of it: a row whose session key has a matching session matches.
        self.session_cols = prefix_key_columns(ckpt, operator, self.store.name)
        # --keys of a plain store: matched by their stored bytes where they encode.
        self.raw_keys: RawKeys | None = None
        decoder = self.decoder
        if spec.keys is not None and decoder is not None and not self.session_cols:
            schema = decoder.schema
            plain = type(decoder) is RowDecoder and schema is not None
            encode = flat_row_encoder(schema.key) if plain and schema is not None else None
            if encode is not None:
                self.raw_keys = RawKeys(spec.keys, encode)

    @property
    def stores(self) -> str:
        """The stores (or families) the keys go from, for the plan."""
        if self.join is not None:
            return ", ".join(STORES)
        if self.target is not None and not self.tws:
            return ", ".join(self.target.families)
        return self.store.name

    @property
    def partitions(self) -> list[int]:
        if self.join is not None:
            return self.join.partitions
        return batch_partitions(self.ckpt, self.store)

    def match(
        self,
        partition: int,
        sink: Callable[[dict[str, Any]], None] | None = None,
        keep: int | None = None,
    ) -> PartitionMatch:
        """The matched keys of one partition and every record they remove; their rows handed
        to ``sink``, else the first ``keep`` of them kept (None: all)."""
        out = PartitionMatch(partition, keep=keep, sink=sink)
        if self.join is not None:
            return self.join.match(out, self.select)
        if self.target is not None:
            return match_partition(self.ckpt, self.target, self.spec.last, out, self.select)
        if self.raw_keys is not None:
            found = self._match_raw(out, self.raw_keys)
            if found is not None:
                return found
            out = PartitionMatch(partition, keep=keep, sink=sink)
        ckpt, decoder, test = self.ckpt, self.decoder, self.select.test
        assert decoder is not None
        version = plan_version(ckpt, self.spec.operator, partition, self.spec.last + 1)
        keys_only, cols = self.select.keys_only, self.session_cols
        # Session windows: first the session keys that have a matching session.
        sessions = (
            _matching_sessions(ckpt, version, decoder, test, keys_only, cols) if cols else None
        )
        for key, value in iter_state(ckpt, version):
            out.keys += 1
            if sessions is not None:
                hit = _session_key(decoder.json_key(key), cols) in sessions
            elif keys_only:
                hit = test({"partition_id": partition, "key": decoder.json_key(key)})
            else:
                hit = test(decoder.row(partition, key, value))
            if hit:
                out.matched += 1
                out.remove(self.store.name, key, value, _row_of(decoder, partition, key, value))
        return out

    def _match_raw(self, out: PartitionMatch, raw_keys: RawKeys) -> PartitionMatch | None:
        """``match`` by the keys' stored bytes (only the matched records decoded) into
        ``out``; None when the partition's keys do not encode back to themselves (checked
        before any is matched)."""
        decoder = self.decoder
        assert decoder is not None
        partition = out.partition
        version = plan_version(self.ckpt, self.spec.operator, partition, self.spec.last + 1)
        find = None
        for batch in packed_batches(self.ckpt, version):
            if not len(batch):
                continue
            if find is None:
                prefix = raw_keys.prefix(batch, decoder.json_key)
                if prefix is None:
                    return None
                find = raw_keys.finder(prefix)
            out.keys += len(batch)
            data = memoryview(batch.data)
            for i in find(batch):
                at, size = int(batch.key_offsets[i]), int(batch.key_sizes[i])
                key = data[at : at + size].tobytes()
                at, size = int(batch.value_offsets[i]), int(batch.value_sizes[i])
                value = data[at : at + size].tobytes()
                out.matched += 1
                out.remove(self.store.name, key, value, _row_of(decoder, partition, key, value))
        return out


def _row_of(decoder: RowDecoder, partition: int, key: bytes, value: bytes) -> RowOf:
    """A removed record's row, decoded only when it is wanted."""
    return lambda: decoder.row(partition, key, value)


def _store(ckpt: Checkpoint, operator: int, version: int | None) -> Store:
    """The operator's store a deletion reads (a join's: its first count store), or the
    refusal of what ckpt cannot delete from (``version``: its join state format, 3+)."""
    op = ckpt.operators.get(operator)
    if op is None:
        ids = ", ".join(map(str, ckpt.operators)) or "none"
        raise UsageError(f"{ckpt.storage.url}: no operator {operator} (operators: {ids})")
    where = f"state/{operator}"
    if version is not None and version not in (3, 4):
        raise DeleteRefused(f"{where}: a stream-stream join in state format {version}")
    join = is_join(op)
    if not join and (len(op.stores) > 1 or DEFAULT_STORE not in op.stores):
        raise DeleteRefused(
            f"{where}: its stores ({', '.join(op.stores)}) are not a join's four, which "
            "ckpt deletes from together"
        )
    if row_checksums(ckpt.conf):
        raise DeleteRefused(f"{where}: row checksums are on: ckpt does not write them yet")
    store = op.stores[COUNTS[0] if join else DEFAULT_STORE]
    if join and len({st.provider for st in op.stores.values()}) > 1:
        raise DeleteRefused(f"{where}: the join's stores are of different providers")
    if store.provider not in ("hdfs", "rocksdb"):
        raise DeleteRefused(f"{where}: its state store provider is {store.provider}")
    return store


def _selection(
    where: str | None, keys: list[dict[str, Any]] | None, columns: list[str]
) -> Callable[[dict[str, Any]], bool]:
    if where is not None:
        return parse_where(where, columns)
    wanted = {_key_id(k) for k in keys or []}
    return lambda row: _key_id(row["key"]) in wanted


def _session_key(key: Any, columns: int) -> str:
    """A session window's state key without its session start: the first ``columns``
    fields (``numColsPrefixKey``), as text."""
    return json.dumps(list(key.items())[:columns], sort_keys=True, default=str)


def _matching_sessions(
    ckpt: Checkpoint,
    version: ReplayPlan,
    decoder: RowDecoder,
    test: Callable[[dict[str, Any]], bool],
    keys_only: bool,
    columns: int,
) -> set[str]:
    """The session keys of ``version``'s rows that match ``test``."""
    found = set()
    for key, value in iter_state(ckpt, version):
        if keys_only:
            row = {"partition_id": version.partition, "key": decoder.json_key(key)}
        else:
            row = decoder.row(version.partition, key, value)
        if test(row):
            found.add(_session_key(row["key"], columns))
    return found


def _key_id(key: Any) -> Any:
    """A key's identity for ``--keys``: its fields (a hash of them), or its JSON when a
    field is not hashable (a nested struct or array)."""
    try:
        return frozenset(key.items())
    except (AttributeError, TypeError):
        return json.dumps(key, sort_keys=True, default=str)
