"""One column family of a store that holds several, read as Spark's ``statestore`` source
reads it: a transformWithState variable (``stateVarName``) or its registered timers
(``readRegisteredTimers``), or a family of a stream-stream join in state format 3/4
(``storeName``, ``joinSide``).

``FamilyRead`` says which family and how; it is plain data, so dataset workers and Spark
executors rebuild the reader from it. ``family_rows`` / ``family_change_rows`` give a
partition's rows, filtered on the rows' grouping key (``where``) or raw.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.model import Checkpoint, CheckpointFile
from ckpt_cli.core.read import iter_file_records, iter_state
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.state.decoders import Filter, row_filter
from ckpt_cli.state.join_families import JoinFamily, join_family_reader
from ckpt_cli.state.target import ReplayTarget, SelectionError
from ckpt_cli.state.tws import VariableReader, state_variables, variable_reader, zips_of

Row = dict[str, Any]


@dataclass(frozen=True)
class FamilyRead:
    """Which family of ``operator``'s ``store`` a read decodes, and how."""

    operator: int
    store: str
    state_var: str | None = None
    timers: bool = False
    flatten: bool = True
    join_family: JoinFamily | None = None
    raw: bool = False
    # The batch whose operator metadata and schema files the read uses (a change feed: its
    # end batch; None: the newest).
    batch: int | None = None
    change_feed: bool = False

    def reader(self, ckpt: Checkpoint) -> VariableReader:
        if self.join_family is not None:
            reader = join_family_reader(ckpt, self.join_family)
        else:
            reader = variable_reader(
                ckpt,
                self.operator,
                self.store,
                state_var=self.state_var,
                timers=self.timers,
                flatten=self.flatten,
                batch=self.batch,
                change_feed=self.change_feed,
            )
        reader.raw = self.raw
        return reader


def family_read(
    ckpt: Checkpoint,
    target: ReplayTarget,
    *,
    state_var: str | None,
    timers: bool,
    flatten: bool,
    join_family: JoinFamily | None,
    raw: bool,
    batch: int | None = None,
    change_feed: bool = False,
) -> FamilyRead | None:
    """The family a read of ``target`` decodes at ``batch`` (a change feed: its end batch),
    or None for a store of one family. As Spark, a transformWithState store needs a state
    variable or its timers named."""
    if join_family is not None:
        return FamilyRead(target.operator, target.store, join_family=join_family, raw=raw)
    variables = state_variables(ckpt, target.operator, batch)
    if variables is None:
        if state_var is not None or timers:
            raise SelectionError(
                f"state/{target.operator} is not a transformWithState operator: it has no "
                "state variables (state_var=) or timers (timers=True)"
            )
        return None
    if state_var is None and not timers:
        raise SelectionError(
            f"state/{target.operator} is a transformWithState operator: name one of its "
            "state variables with state_var=NAME (" + ", ".join(variables) + ") or read "
            "its timers with timers=True"
        )
    return FamilyRead(
        target.operator,
        target.store,
        state_var,
        timers,
        flatten,
        raw=raw,
        batch=batch,
        change_feed=change_feed,
    )


def family_filter(reader: VariableReader, where: Any) -> Filter | None:
    """``where`` over the rows' grouping key (not with raw rows: nothing is decoded)."""
    if not where:
        return None
    if reader.raw:
        raise SelectionError("{where} compares decoded key columns: not with {raw}")
    value = reader.value_schema if reader.value_schema is not None else StructType(())
    schema = StateSchema(reader.row_key_schema(), value, 3)
    return row_filter(where, schema)


def family_rows(
    ckpt: Checkpoint, plan: ReplayPlan, reader: VariableReader, matches: Filter | None
) -> Iterator[Row]:
    """The family's rows of one partition's plan."""
    zips = zips_of(ckpt, plan.operator, plan.store, plan.partition)
    cf_ids = reader.family_ids(ckpt, zips, plan.partition, (plan.version, plan.version))
    if not cf_ids:
        return
    # Closed at once when a row fails: the zip's temporary RocksDB copy goes with it.
    with closing(iter_state(ckpt, plan, checksummed=reader.checksums)) as pairs:
        for row in reader.rows(pairs, cf_ids):
            if matches is None or matches(row):
                yield {"partition_id": plan.partition, **row}


def family_change_rows(
    ckpt: Checkpoint,
    target: ReplayTarget,
    changes: Mapping[tuple[int, int], CheckpointFile],
    reader: VariableReader,
    matches: Filter | None,
) -> Iterator[Row]:
    """The family's change feed: one file per (batch, partition)."""
    op, store = target.operator, target.store
    # Store versions (batch + 1) of the feed, per partition.
    spans: dict[int, tuple[int, int]] = {}
    for batch, pid in changes:
        low, high = spans.get(pid, (batch + 1, batch + 1))
        spans[pid] = (min(low, batch + 1), max(high, batch + 1))
    ids = {
        pid: reader.family_ids(ckpt, zips_of(ckpt, op, store, pid), pid, span)
        for pid, span in spans.items()
    }
    for (batch, pid), f in sorted(changes.items()):
        cf_ids = ids[pid]
        if not cf_ids:
            continue
        for row in reader.change_rows(iter_file_records(ckpt, f), cf_ids):
            if matches is None or matches(row):
                yield {"batch_id": batch, "partition_id": pid, **row}


def family_layout_problems(
    ckpt: Checkpoint, plan: ReplayPlan, reader: VariableReader, limit: int
) -> Iterator[tuple[Any, str | None]]:
    """``VariableReader.layout_problems`` of one partition's plan."""
    zips = zips_of(ckpt, plan.operator, plan.store, plan.partition)
    cf_ids = reader.family_ids(ckpt, zips, plan.partition, (plan.version, plan.version))
    if not cf_ids:
        return
    with closing(iter_state(ckpt, plan, checksummed=reader.checksums)) as pairs:
        yield from reader.layout_problems(pairs, cf_ids, limit)
