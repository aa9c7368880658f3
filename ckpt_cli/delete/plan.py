"""Planning ``ckpt state delete``: the keys of one operator's state at the last committed
batch N that match ``--where`` (or are listed in ``--keys``), per partition, and how the
deletion batch N+1 removes them from state version N+2 as Spark writes a batch that removed
them: an HDFS ``.delta`` of removals; a RocksDB changelog of deletes where the store has
changelogs (changelog checkpointing on), else a new ``.zip`` of the keys left.

A key is the operator's own state key: the grouping key of aggregations, deduplication and
flatMapGroupsWithState; the session key of session windows, every session of it; the join
key of a stream-stream join in state format 1-3, from its four stores (or column families)
together (:mod:`ckpt_cli.delete.joins`); the grouping key of transformWithState in every
column family that holds it, or in one state variable's or the timers'
(:mod:`ckpt_cli.delete.families`); the join key of a join in state format 4 from its
four families (the same module).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.change.batch import NewBatch
from ckpt_cli.change.safety import last_batch_committed, links_refused
from ckpt_cli.change.state_version import store_writes
from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint, Store
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan, plan_version
from ckpt_cli.delete.families import join_target, match_families, tws_target
from ckpt_cli.delete.joins import COUNTS, STORES, count_family_columns, is_join, match_join
from ckpt_cli.delete.selection import Selection
from ckpt_cli.errors import CkptError, UsageError
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Result, fields_json
from ckpt_cli.state.decoders import RowDecoder
from ckpt_cli.state.join_families import join_format
from ckpt_cli.state.reader import decoder_for, prefix_key_columns
from ckpt_cli.state.where import Where, parse_where, schema_columns

SAMPLE_ROWS = 5


class DeleteRefused(CkptError, code="DELETE_REFUSED"):
    """``ckpt state delete`` will not run on this checkpoint (the message says why)."""


@dataclass
class PartitionDeletion:
    partition: int
    keys: int  # in the state before
    matched: int
    bytes: int  # of the matched records (key + value)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, "partition keys matched bytes")


@dataclass
class DeletePlan(NewBatch, Result):
    """What ``ckpt state delete`` removes: the matched keys of ``operator``'s store at the
    last committed batch, per partition, written as ``writes`` (``delta``, ``changelog`` or
    ``snapshot``) of version N+2 by batch N+1."""

    checkpoint: str
    last_committed: int
    operator: int
    store: str
    provider: str
    writes: str
    selection: str
    checkpoint_format_version: int = 1
    # transformWithState: the column families the keys are removed from.
    column_families: list[str] = field(default_factory=list)
    partitions: list[PartitionDeletion] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    output: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The raw keys to remove, per store and partition (not in the JSON: the output file has
    # them).
    matched: dict[tuple[str, int], list[bytes]] = field(default_factory=dict, repr=False)

    @property
    def nothing_to_do(self) -> bool:
        return not any(p.matched for p in self.partitions)

    def body_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "checkpoint last_committed batch version operator store provider writes selection"
            " column_families keys matched bytes partitions sample output notes warnings",
            keys=sum(p.keys for p in self.partitions),
            matched=sum(p.matched for p in self.partitions),
            bytes=sum(p.bytes for p in self.partitions),
            partitions=[p.to_json() for p in self.partitions if p.matched],
        )


def read_keys_file(path: str) -> list[dict[str, Any]]:
    """``--keys FILE``: one key per line as JSON, the shape ``ckpt replay`` prints (a whole
    row, whose ``key`` is taken, or the key object itself)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line for line in fh if line.strip()]
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the keys file ({exc.strerror})") from exc
    keys = []
    for number, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path} (line {number}): not a JSON key: {exc}") from exc
        if not isinstance(obj, dict):
            raise UsageError(f"{path} (line {number}): a key is a JSON object")
        keys.append(obj["key"] if isinstance(obj.get("key"), dict) else obj)
    return keys


def plan_delete(
    ckpt: Checkpoint,
    *,
    operator: int,
    where: str | None = None,
    keys: list[dict[str, Any]] | None = None,
    output: str | None = None,
    state_var: str | None = None,
    timers: bool = False,
    progress: ProgressSink = NULL_PROGRESS,
) -> DeletePlan:
    """Plan the deletion of the keys of ``operator`` that match ``where`` (the ``--where``
    language, :mod:`ckpt_cli.state.where`) or are among ``keys``; nothing in the checkpoint
    changes. ``output``: a local file the matched rows are written to (JSON lines), now.
    transformWithState: ``state_var`` removes the keys from that state variable only,
    ``timers`` from the timers only (default: from every column family)."""
    url = ckpt.storage.url
    if (where is None) == (keys is None):
        raise UsageError("name the keys to delete: --where EXPR or --keys FILE (one of them)")
    links = links_refused(ckpt)
    if links:
        raise DeleteRefused(f"{url}: not deleting: {links[0]}")
    last = last_batch_committed(
        ckpt,
        DeleteRefused,
        "delete from",
        unfinished="an unfinished change",
        undo="ckpt state delete CHECKPOINT --undo rolls back an unfinished deletion",
    )
    store = _store(ckpt, operator)
    tws = _is_tws(ckpt, operator)
    if (state_var is not None or timers) and not tws:
        flag = "--state-var" if state_var is not None else "--timers"
        raise UsageError(f"state/{operator}: {flag} is for a transformWithState operator")
    if state_var is not None and timers:
        raise UsageError("--state-var and --timers: name one of them")
    families = join_format(ckpt, operator) == 3
    join = families or is_join(ckpt.operators[operator])
    if tws:
        target = tws_target(ckpt, operator, last, state_var=state_var, timers=timers)
    elif join_format(ckpt, operator) == 4:
        target = join_target(ckpt, operator)
    else:
        target = None
    if target is None:
        decoder = decoder_for(ckpt, operator, COUNTS[0] if join and not families else store.name)
    if target is not None:
        columns = schema_columns(*target.columns())
    elif families:
        columns = schema_columns(*count_family_columns(ckpt, operator))
    elif decoder.schema is None:
        raise DeleteRefused(f"state/{operator}: no state schema file: keys cannot be matched")
    else:
        columns = schema_columns(decoder.schema.key, decoder.schema.value)
    test = _selection(where, keys, columns)
    plan = DeletePlan(
        checkpoint=url,
        last_committed=last,
        operator=operator,
        store=(
            ", ".join(STORES)
            if join
            else ", ".join(target.families)
            if target is not None and not tws
            else store.name
        ),
        provider=store.provider,
        writes=store_writes(ckpt, operator, store.name),
        selection=where if where is not None else f"{len(keys or [])} keys from --keys",
        output=output,
        column_families=sorted(target.families) if tws and target is not None else [],
    )
    # Keys alone are decoded while matching when the selection reads no value (--keys, a
    # --where on key columns): the value of a matched row only (a third of the time at 1M).
    keys_only = not isinstance(test, Where) or "value" not in test.sides
    # Session windows: a state key is (session key, session start), and deleting a key means
    # every session of it: a row whose session key has a matching session matches.
    session_cols = prefix_key_columns(ckpt, operator, store.name)
    out = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115

    def emit(row: dict[str, Any]) -> None:
        if len(plan.sample) < SAMPLE_ROWS:
            plan.sample.append(row)
        if out is not None:
            out.write(json.dumps(row, default=str) + "\n")

    if join or target is not None:
        select = Selection(test, keys_only, emit, progress)
        try:
            if target is not None:
                found = match_families(ckpt, target, last, select)
                if tws:
                    plan.notes.append(f"transformWithState: keys removed from {target.what}")
            else:
                found = match_join(ckpt, operator, last, select)
        finally:
            if out is not None:
                out.close()
        plan.matched = found.removals
        plan.partitions = [PartitionDeletion(p, *c) for p, c in sorted(found.counts.items())]
        return _finish(ckpt, plan)
    progress.start("Matching keys", total=len(store.partitions))
    try:
        for partition in store.partitions:
            counted = PartitionDeletion(partition, 0, 0, 0)
            version = plan_version(ckpt, operator, partition, last + 1)

            # Session windows: first the session keys that have a matching session.
            sessions = (
                _matching_sessions(ckpt, version, decoder, test, keys_only, session_cols)
                if session_cols
                else None
            )
            for key, value in iter_state(ckpt, version):
                counted.keys += 1
                if sessions is not None:
                    hit = _session_key(decoder.json_key(key), session_cols) in sessions
                elif keys_only:
                    hit = test({"partition_id": partition, "key": decoder.json_key(key)})
                else:
                    hit = test(decoder.row(partition, key, value))
                if not hit:
                    continue
                counted.matched += 1
                counted.bytes += len(key) + len(value)
                plan.matched.setdefault((store.name, partition), []).append(key)
                emit(decoder.row(partition, key, value))
            plan.partitions.append(counted)
            progress.advance()
    finally:
        progress.close()
        if out is not None:
            out.close()
    return _finish(ckpt, plan)


def _finish(ckpt: Checkpoint, plan: DeletePlan) -> DeletePlan:
    operator = plan.operator
    if plan.nothing_to_do:
        plan.notes.append("no key matches: nothing to delete")
    others = [str(o) for o in ckpt.operators if o != operator]
    if others and not plan.nothing_to_do:
        plan.notes.append(
            f"state/{', '.join(others)}: version {plan.version} written unchanged (Spark "
            "loads that version of every operator)"
        )
    return plan


def _store(ckpt: Checkpoint, operator: int) -> Store:
    op = ckpt.operators.get(operator)
    if op is None:
        ids = ", ".join(map(str, ckpt.operators)) or "none"
        raise UsageError(f"{ckpt.storage.url}: no operator {operator} (operators: {ids})")
    where = f"state/{operator}"
    version = join_format(ckpt, operator)
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


def _is_tws(ckpt: Checkpoint, operator: int) -> bool:
    """A transformWithState operator: operator metadata v2 that is not a join's."""
    return bool(ckpt.operators[operator].metadata_v2_files) and join_format(ckpt, operator) is None


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
