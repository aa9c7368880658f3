"""The pipeline assembled, as Spark's ``statestore`` source reads state: ``read_state``
returns ``StateRows`` (the state at a batch, or the change feed), to iterate or turn into
Arrow or pandas.

Choosing happens before any row: the target is resolved and every partition planned when
``StateRows`` is made, so errors and ``notes`` come first; rows are read when iterated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core import loadable
from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint, CheckpointFile
from ckpt_cli.core.read import iter_file_records, iter_state, store_schema
from ckpt_cli.core.rebuild import (
    REPAIR_HINT,
    ReplayPlan,
    StateUnavailable,
    change_file,
    change_files,
    plan_version,
)
from ckpt_cli.errors import (
    FormatError,
    LimitExceededError,
    MissingExtraError,
    UnsupportedVersionError,
)
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.state.columns import state_tables
from ckpt_cli.state.decoders import (
    Filter,
    JoinSideDecoder,
    PrefixScanDecoder,
    RowDecoder,
    require_pyarrow,
    row_filter,
)
from ckpt_cli.state.families import (
    FamilyRead,
    family_change_rows,
    family_filter,
    family_read,
    family_rows,
)
from ckpt_cli.state.join_families import JoinFamily, join_families, join_family, join_format
from ckpt_cli.state.target import ReplayTarget, SelectionError, resolve_target, state_time
from ckpt_cli.state.tws import registers_timers, state_variables
from ckpt_cli.storage.errors import first_line

# ``where``: conditions that must all hold: ``--where`` expressions over key and value
# columns (``state.where``), or (key column, value) pairs.
Where = tuple[tuple[str, str] | str, ...]
# The change feed's file of each (batch, partition).
ChangeFiles = dict[tuple[int, int], CheckpointFile]


def decoder_for(
    ckpt: Checkpoint, operator: int, store: str, *, raw: bool = False, join_side: bool = False
) -> RowDecoder:
    """The decoder of a store's rows: its schema file's, or hex with ``raw``; with
    ``join_side``, in the shape of Spark's ``joinSide`` reads."""
    provider = ckpt.operators[operator].stores[store].provider
    schema = None if raw else store_schema(ckpt, operator, store)
    if join_side and schema is not None:
        return JoinSideDecoder(schema, provider, path=f"state/{operator}")
    prefix_cols = prefix_key_columns(ckpt, operator, store)
    if provider == "rocksdb" and schema is not None and prefix_cols:
        return PrefixScanDecoder(
            schema, provider, prefix_cols=prefix_cols, path=f"state/{operator}"
        )
    return RowDecoder(schema, provider, path=f"state/{operator}")


def prefix_key_columns(ckpt: Checkpoint, operator: int, store: str) -> int:
    """``numColsPrefixKey`` of a store in its operator's metadata (0 without one)."""
    meta = ckpt.operator_metadata(operator)
    if meta is None:
        return 0
    return next((cols for name, cols, _ in meta.stores if name == store), 0)


def _conditions(where: Mapping[str, str] | Where | str | None) -> Where:
    if isinstance(where, str):
        return (where,)
    return tuple(where.items()) if isinstance(where, Mapping) else tuple(where or ())


JOIN_SIDES = ("left", "right")


def requested_store(
    ckpt: Checkpoint, operator: int | None, store: str | None, join_side: str | None
) -> tuple[str | None, JoinFamily | None]:
    """The store a read decodes: ``store``, or for ``join_side`` the side's
    ``keyWithIndexToValue`` (Spark's ``StreamStreamJoinStateHelper`` reads the side's values
    by key from it); of a join in state format 3 or 4, its one store and the family read."""
    if join_side is not None and join_side not in JOIN_SIDES:
        raise SelectionError(f"{{join_side}} is {join_side!r}: give left or right")
    if join_side is not None and store is not None:
        raise SelectionError("give {join_side} or {store}, not both")
    family = join_family(ckpt, operator, store, join_side)
    if family is not None:
        return DEFAULT_STORE, family
    if join_side is None:
        return store, None
    return f"{join_side}-keyWithIndexToValue", None


def covering_reads(
    ckpt: Checkpoint, operator: int, batch: int | None = None
) -> list[dict[str, Any]]:
    """The ``read_state`` options that together read all of an operator's state at ``batch``
    (default: the newest operator metadata's), the way Spark's reader must be asked for it:
    one per transformWithState variable of that batch and one for its timers, one per column
    family of a format 3/4 join, else one plain read."""
    variables = state_variables(ckpt, operator, batch)
    if variables is not None:
        timers = [{"timers": True}] if registers_timers(ckpt, operator, batch) else []
        return [{"state_var": v} for v in variables] + timers
    if join_format(ckpt, operator) is not None:
        return [{"store": family} for family in join_families(ckpt, operator)]
    return [{}]


@dataclass
class StateRows:
    """The rows of one store: its state at a version (one plan per partition), or with
    ``changes`` the change feed (one file per batch and partition).

    Iterating gives ``{"partition_id", "key", "value"}`` dicts (change feed rows also
    ``batch_id`` and ``change_type``) with plain JSON values; ``to_arrow()`` gives the table
    ``--format parquet`` writes.
    """

    ckpt: Checkpoint
    target: ReplayTarget
    plans: list[ReplayPlan]
    raw: bool = False
    where: Where = ()
    changes: ChangeFiles | None = None
    # One family of a store of several: a transformWithState variable or its timers, a
    # format 3/4 join's family.
    family: FamilyRead | None = None
    join_side: bool = False

    def __post_init__(self) -> None:
        self.decoder = decoder_for(
            self.ckpt,
            self.target.operator,
            self.target.store,
            raw=self.raw,
            join_side=self.join_side,
        )
        self.state_var = None if self.family is None else self.family.reader(self.ckpt)
        # Checked before any row.
        if self.state_var is not None:
            self.matches = family_filter(self.state_var, self.where)
        else:
            self.matches = row_filter(self.where, self.decoder.schema)

    @property
    def notes(self) -> list[str]:
        """What a best-effort read did instead of what was asked."""
        return self.target.notes

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.state_var is not None and self.changes is not None:
            return family_change_rows(
                self.ckpt, self.target, self.changes, self.state_var, self.matches
            )
        if self.state_var is not None:
            reader = self.state_var
            return (
                row
                for plan in self.plans
                for row in family_rows(self.ckpt, plan, reader, self.matches)
            )
        if self.changes is not None:
            return iter_change_rows(self.ckpt, self.changes, self.decoder, self.matches)
        return (
            row
            for plan in self.plans
            for row in iter_rows(self.ckpt, plan, self.decoder, self.matches)
        )

    @property
    def arrow_schema(self) -> Any:
        """The Arrow schema of the rows of one family (the schemas of the read's batch: an
        evolved state's older rows have its new fields null), or None: inferred from them."""
        if self.state_var is None:
            return None
        return self.state_var.arrow_schema(change_feed=self.changes is not None)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` of the rows (needs pyarrow)."""
        require_pyarrow("to_arrow()")
        import pyarrow as pa

        return pa.concat_tables(state_tables(self))

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the rows (needs pyarrow and pandas)."""
        try:
            import pandas  # noqa: F401  (no extra brings it: asked before the rows are read)
        except ImportError as exc:
            raise MissingExtraError(
                "to_pandas() needs pandas: pip install pandas", hint=first_line(exc)
            ) from exc
        return self.to_arrow().to_pandas()


def read_state(
    checkpoint: Checkpoint | str,
    *,
    batch: int | None = None,
    version: int | None = None,
    operator: int | None = None,
    store: str | None = None,
    partitions: Iterable[int] | None = None,
    change_start_batch: int | None = None,
    change_end_batch: int | None = None,
    where: Mapping[str, str] | Where | str | None = None,
    raw: bool = False,
    best_effort: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    state_var: str | None = None,
    timers: bool = False,
    flatten: bool = True,
    join_side: str | None = None,
) -> StateRows:
    """The state of a store after ``batch`` (default: the latest committed), like
    ``spark.read.format("statestore")``; with ``change_start_batch``, like its
    ``readChangeFeed`` option, the change feed instead: every put (``update``), delete and
    merge of batches ``change_start_batch``..``change_end_batch`` (default: the latest
    committed). ``where`` keeps the rows that match: a ``--where`` expression
    (``"key.k = 'a' and value.count > 5"``, :mod:`ckpt_cli.state.where`), or key columns equal
    to the given values (a mapping, or (column, value) pairs). A path or URL is
    opened with ``storage_options``. Of a transformWithState operator one state variable is
    read (``state_var``, Spark's ``stateVarName``) or its timers (``timers``,
    ``readRegisteredTimers``); ``flatten=False`` gives a list or map variable's collection in
    one row per key (``flattenCollectionTypes=false``). ``join_side`` ("left" or "right")
    reads a stream-stream join's side like Spark's ``joinSide`` option."""
    ckpt = _open(checkpoint, storage_options)
    store, family = requested_store(ckpt, operator, store, join_side)
    target = resolve_target(
        ckpt, batch=batch, version=version, operator=operator, store=store, partitions=partitions
    )
    options = ReadOptions(
        change_start_batch=change_start_batch,
        change_end_batch=change_end_batch,
        where=_conditions(where),
        raw=raw,
        best_effort=best_effort,
        state_var=state_var,
        timers=timers,
        flatten=flatten,
        join_side=join_side is not None,
        join_family=family,
    )
    return target_rows(ckpt, target, options)


@dataclass(frozen=True)
class ReadOptions:
    """How :func:`target_rows` reads a resolved target: ``read_state``'s arguments past the
    choice of store, partitions and version (``join_side``: whether a join side is read,
    ``join_family`` its state in the store's column families, when it is there)."""

    change_start_batch: int | None = None
    change_end_batch: int | None = None
    where: Where = ()
    raw: bool = False
    best_effort: bool = False
    state_var: str | None = None
    timers: bool = False
    flatten: bool = True
    join_side: bool = False
    join_family: JoinFamily | None = None


def target_rows(
    ckpt: Checkpoint, target: ReplayTarget, options: ReadOptions | None = None
) -> StateRows:
    """``read_state`` for a resolved target: the key filter is checked, then every
    partition planned, before any row is read."""
    options = options or ReadOptions()
    start, end = options.change_start_batch, options.change_end_batch
    if start is not None and end is None:
        end = ckpt.batches.latest_committed or 0
    # Spark reads a change feed with the operator metadata of its end batch.
    family = family_read(
        ckpt,
        target,
        state_var=options.state_var,
        timers=options.timers,
        flatten=options.flatten,
        join_family=options.join_family,
        raw=options.raw,
        batch=target.batch if start is None else end,
        change_feed=start is not None,
    )
    join_side = options.join_side and not options.join_family
    rows = StateRows(
        ckpt, target, [], options.raw, options.where, family=family, join_side=join_side
    )
    if start is not None and options.join_side:
        raise SelectionError("{join_side} reads have no change feed (Spark refuses them too)")
    if start is not None:
        assert end is not None
        rows.changes = plan_changes(ckpt, target, start, end, best_effort=options.best_effort)
    elif options.change_end_batch is not None:
        raise SelectionError("{change_end_batch} is given without {change_start_batch}")
    else:
        plans = [
            plan_partition(ckpt, target, p, best_effort=options.best_effort)
            for p in target.partitions
        ]
        rows.plans = plans
    return rows


def _open(checkpoint: Checkpoint | str, storage_options: Mapping[str, Any] | None) -> Checkpoint:
    if isinstance(checkpoint, Checkpoint):
        return checkpoint
    return Checkpoint.open(checkpoint, dict(storage_options or {}))


# -- the plans of a target, with best-effort fallbacks -----------------------------------------


@contextmanager
def read_hints() -> Iterator[None]:
    """A damaged state file met while reading rows is an error whose hint names what fixes
    it, as a missing one's (``StateUnavailable``) does: not a version ckpt does not read, nor
    a file beyond its limits, which no repair cures."""
    try:
        yield
    except FormatError as exc:
        if exc.hint is None and not isinstance(exc, (UnsupportedVersionError, LimitExceededError)):
            exc.hint = REPAIR_HINT
        raise


def plan_partition(
    ckpt: Checkpoint, target: ReplayTarget, partition: int, *, best_effort: bool = False
) -> ReplayPlan:
    """The plan for one partition of ``target``; with ``best_effort`` the newest version at
    or below the target whose files load (planned, and their bytes checked before any row
    is read: a missing or resized SST, a damaged zip, delta, snapshot or changelog, a broken
    lineage) instead of an error, and a note in ``target.notes`` says which version."""
    versions = [target.version]
    if best_effort:
        part = ckpt.operators[target.operator].stores[target.store].partitions[partition]
        versions += reversed([v for v in part.version_ids if v < target.version])
    first_error: StateUnavailable | None = None
    for v in versions:
        try:
            plan = plan_version(ckpt, target.operator, partition, v, store=target.store)
        except StateUnavailable as exc:
            if not best_effort:
                raise
            first_error = first_error or exc
            continue
        if not best_effort:
            return plan
        found = loadable.problems(ckpt, plan)
        if found:
            code, message, paths = found[0]
            first_error = first_error or StateUnavailable(message, reason=code, paths=tuple(paths))
            continue
        if v != target.version:
            assert first_error is not None
            target.notes.append(
                f"partition {partition}: version {target.version} does not load "
                f"({first_error.message}); replayed version {v} ({state_time(v)}) instead"
            )
        return plan
    assert first_error is not None
    raise first_error


def plan_changes(
    ckpt: Checkpoint,
    target: ReplayTarget,
    start_batch: int,
    end_batch: int,
    *,
    best_effort: bool = False,
) -> ChangeFiles:
    """The file of each (batch, partition) of the change feed of ``target``'s partitions.

    As Spark does, format v2 follows the changelog lineage back from the end batch; with
    ``best_effort`` a broken lineage falls back to the changelogs the commit log names, and
    a note in ``target.notes`` says so.
    """
    if start_batch > end_batch:
        raise SelectionError(
            f"{{change_start_batch}} {start_batch} is after {{change_end_batch}} {end_batch}"
        )
    files = {}
    for pid in target.partitions:
        chosen = _partition_changes(ckpt, target, pid, start_batch, end_batch, best_effort)
        for batch, f in zip(range(start_batch, end_batch + 1), chosen, strict=True):
            files[(batch, pid)] = f
    return files


def _partition_changes(
    ckpt: Checkpoint,
    target: ReplayTarget,
    pid: int,
    start_batch: int,
    end_batch: int,
    best_effort: bool,
) -> list[CheckpointFile]:
    op, store = target.operator, target.store
    try:
        return change_files(ckpt, op, pid, start_batch + 1, end_batch + 1, store=store)
    except StateUnavailable as exc:
        if not best_effort:
            raise
        first_error = exc
    try:
        chosen = [
            change_file(ckpt, op, pid, batch + 1, store=store)
            for batch in range(start_batch, end_batch + 1)
        ]
    except StateUnavailable:
        raise first_error from None
    target.notes.append(
        f"{first_error.message}; read the changelogs of the commit log's uniqueIds instead: "
        + ", ".join(f.entry.name for f in chosen)
    )
    return chosen


# -- one partition's rows --------------------------------------------------------------------


def iter_rows(
    ckpt: Checkpoint,
    plan: ReplayPlan,
    decoder: RowDecoder,
    where: Filter | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> Iterator[dict[str, Any]]:
    """The rows of one partition's plan."""
    json_row = decoder.json_row  # ``decoder.row`` inlined: the hot loop of every row output
    pid = plan.partition
    for k, v in iter_state(ckpt, plan, progress):
        key, value = json_row(k, v)
        row = {"partition_id": pid, "key": key, "value": value}
        if where is None or where(row):
            yield row


def iter_change_rows(
    ckpt: Checkpoint, files: ChangeFiles, decoder: RowDecoder, where: Filter | None = None
) -> Iterator[dict[str, Any]]:
    """Change feed rows, by batch then partition, in the shape of Spark 4's
    ``readChangeFeed`` rows."""
    for (batch, pid), f in sorted(files.items()):
        for kind, k, v in iter_file_records(ckpt, f):
            key, value = decoder.json_row(k, v)
            row = {
                "batch_id": batch,
                "change_type": "update" if kind == "put" else kind,
                "partition_id": pid,
                "key": key,
                "value": value,
            }
            if where is None or where(row):
                yield row
