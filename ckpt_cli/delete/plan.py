"""Planning ``ckpt state delete``: the keys of one operator's state at the last committed
batch N that match ``--where`` (or are listed in ``--keys``), per partition
(:mod:`ckpt_cli.delete.matching`; with a distributed engine, a task per partition), and how
the deletion batch N+1 removes them from state version N+2 as Spark writes a batch that
removed them: an HDFS ``.delta`` of removals; a RocksDB changelog of deletes where the store
has changelogs (changelog checkpointing on), else a new ``.zip`` of the keys left.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckpt_cli.change.batch import NewBatch
from ckpt_cli.change.safety import last_batch_committed, links_refused
from ckpt_cli.change.state_version import store_writes
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.matching import DeleteRefused, Matcher, MatchSpec
from ckpt_cli.delete.selection import PartitionMatch
from ckpt_cli.delete.tasks import match_partitions
from ckpt_cli.errors import UsageError
from ckpt_cli.formats.tws import same_location, schema_homes
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Result, fields_json
from ckpt_cli.state.tws import operator_metadata_v2

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine

SAMPLE_ROWS = 5


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
    engine: Engine | None = None,
) -> DeletePlan:
    """Plan the deletion of the keys of ``operator`` that match ``where`` (the ``--where``
    language, :mod:`ckpt_cli.state.where`) or are among ``keys``; nothing in the checkpoint
    changes. ``output``: a local file the matched rows are written to (JSON lines), now.
    transformWithState: ``state_var`` removes the keys from that state variable only,
    ``timers`` from the timers only (default: from every column family). ``engine``: a
    distributed one matches each partition as a task."""
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
    spec = MatchSpec(
        operator, last, where, tuple(keys) if keys is not None else None, state_var, timers
    )
    matcher = Matcher(ckpt, spec)
    target = matcher.target
    plan = DeletePlan(
        checkpoint=url,
        last_committed=last,
        operator=operator,
        store=matcher.stores,
        provider=matcher.store.provider,
        writes=store_writes(ckpt, operator, matcher.store.name),
        selection=where if where is not None else f"{len(keys or [])} keys from --keys",
        output=output,
        column_families=sorted(target.families) if matcher.tws and target else [],
    )
    if matcher.tws and target is not None:
        plan.notes.append(f"transformWithState: keys removed from {target.what}")
        plan.notes += _copied_home(ckpt, operator)
    partitions = matcher.partitions
    out = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115

    def emit(row: dict[str, Any]) -> None:
        if len(plan.sample) < SAMPLE_ROWS:
            plan.sample.append(row)
        if out is not None:
            out.write(json.dumps(row, default=str) + "\n")

    try:
        if engine is not None and engine.name != "local":
            # Rows travel back only as far as they are used: all for --output, else a sample.
            keep = None if output else SAMPLE_ROWS
            found: Iterable[PartitionMatch] = match_partitions(
                ckpt, spec, partitions, keep, engine, progress
            )
        else:
            found = _matched_here(matcher, partitions, emit, progress)
        for match in found:
            plan.partitions.append(
                PartitionDeletion(match.partition, match.keys, match.matched, match.size)
            )
            for store, removed in match.removals.items():
                plan.matched[(store, match.partition)] = removed
            for row in match.rows:
                emit(row)
    finally:
        if out is not None:
            out.close()
    return _finish(ckpt, plan)


def _matched_here(
    matcher: Matcher,
    partitions: list[int],
    emit: Callable[[dict[str, Any]], None],
    progress: ProgressSink,
) -> Iterator[PartitionMatch]:
    """Each partition's matches, matched in this process, their rows handed to ``emit`` as
    they come (none kept: a deletion of most keys holds no row of them)."""
    progress.start("Matching keys", total=len(partitions))
    try:
        for partition in partitions:
            yield matcher.match(partition, sink=emit)
            progress.advance()
    finally:
        progress.close()


def _copied_home(ckpt: Checkpoint, operator: int) -> list[str]:
    """A note when the operator metadata names its schema files in another home (a copy):
    the deletion is right, but Spark restarts the copy only once it is relocated."""
    meta = operator_metadata_v2(ckpt, operator)
    here = ckpt.storage.spark_location
    homes = sorted(h for h in schema_homes(meta) if not same_location(h, here)) if meta else []
    if not homes:
        return []
    return [
        f"state/{operator}: its operator metadata names its schema files under {homes[0]}, "
        "not here (a copy): Spark restarts it once it is relocated, with "
        "`ckpt relocate CHECKPOINT NEW_HOME --apply`"
    ]


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
