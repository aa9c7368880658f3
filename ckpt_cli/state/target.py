"""What to replay: the caller's choice of operator, store, partitions and batch, resolved
against the checkpoint (defaults filled in, every choice checked) into a ``ReplayTarget``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.results import fields_json

_PARAMETER = re.compile(r"\{(\w+)\}")
T = TypeVar("T")


class SelectionError(CkptError):
    """A choice that does not fit the checkpoint, or is missing where it is needed.

    ``message`` names the arguments at fault (``operator``, ``store``, ``where``,
    ``start_batch``...) in ``{braces}``; they are shown as ``names`` maps them (by default
    as they are), so the CLI can speak of its options instead.
    """

    def __init__(self, message: str, *, names: Mapping[str, str] | None = None) -> None:
        given = names or {}
        super().__init__(_PARAMETER.sub(lambda m: given.get(m[1], m[1]), message))
        self.template = message

    def naming(self, names: Mapping[str, str]) -> SelectionError:
        return SelectionError(self.template, names=names)


@dataclass
class ReplayTarget:
    """One operator's store, some partitions, at one version; ``notes`` collects what a
    best-effort replay did instead of what was asked."""

    operator: int
    store: str
    partitions: list[int]
    version: int
    notes: list[str] = field(default_factory=list)

    @property
    def batch(self) -> int:
        return self.version - 1

    @property
    def when(self) -> str:
        """``after batch N``, in words a person reads (version 0 has no batch -1)."""
        return state_time(self.version)

    def to_json(self) -> dict[str, object]:
        return fields_json(self, "operator store partitions version batch")


def state_time(version: int) -> str:
    """When a store's ``version`` holds the state: after batch version-1, or before any."""
    return "before the first batch" if version == 0 else f"after batch {version - 1:,}"


def resolve_target(
    ckpt: Checkpoint,
    *,
    batch: int | None = None,
    version: int | None = None,
    operator: int | None = None,
    store: str | None = None,
    partitions: Iterable[int] | None = None,
) -> ReplayTarget:
    """Fill in defaults and check the choices against the checkpoint; CkptError if invalid.

    The default operator or store is the only one there is; the default version is the one
    after the latest committed batch (Spark's ``batchId`` reads the same)."""
    if not ckpt.operators:
        raise CkptError(f"{ckpt.storage.url}: the query has no state (no state/ directory)")
    known_ops = ", ".join(str(o) for o in ckpt.operators)
    if operator is None:
        several = "the query has several stateful operators; choose one with {operator}"
        operator = _only(ckpt.operators, f"{ckpt.storage.url}: {several}")
    op = ckpt.operators.get(operator)
    if op is None:
        raise CkptError(
            f"{ckpt.storage.url}: operator {operator} has no state (operators: {known_ops})"
        )
    if store is None:
        several = "several state stores; choose one with {store}"
        store = _only(op.stores, f"{op.path}: operator {operator} has {several}")
    if store not in op.stores:
        raise CkptError(f"{op.path}: no store {store!r} (stores: {', '.join(op.stores)})")
    known = sorted(op.stores[store].partitions)
    if version is None:
        version = _committed(ckpt, batch) + 1
    chosen = sorted(set(partitions)) if partitions else _of_batch(ckpt, known, version - 1)
    unknown = [p for p in chosen if p not in op.stores[store].partitions]
    if unknown:
        raise CkptError(
            f"{op.path}: no partition {', '.join(map(str, unknown))} "
            f"(partitions {known[0]}-{known[-1]})"
        )
    return ReplayTarget(operator, store, chosen, version)


def _of_batch(ckpt: Checkpoint, known: list[int], batch: int) -> list[int]:
    """The partitions batch ``batch`` ran with (its offsets entry's shuffle partitions): a
    repartition leaves directories the other side of it does not use."""
    if batch not in ckpt.batches.offsets:
        return known
    try:
        count = ckpt.offsets(batch).shuffle_partitions
    except CkptError:
        return known
    return known if count is None else [p for p in known if p < count]


def _only(choices: Mapping[T, object], several: str) -> T:
    """The one key of ``choices``; with more, SelectionError ``several (key, key...)``."""
    if len(choices) > 1:
        raise SelectionError(f"{several} ({', '.join(map(str, choices))})")
    return next(iter(choices))


def _committed(ckpt: Checkpoint, batch: int | None) -> int:
    """``batch``, checked to be committed; by default the latest committed batch."""
    latest = ckpt.batches.latest_committed
    if batch is None:
        if latest is None:
            raise CkptError(f"{ckpt.storage.url}: no committed batch to replay")
        return latest
    if latest is not None and batch > latest:
        raise CkptError(
            f"{ckpt.storage.url}: batch {batch} is not committed (latest committed: {latest})"
        )
    if batch < 0:
        raise CkptError(f"batch {batch} is negative")
    return batch
