"""Deleting keys from a stream-stream join (state formats 1 and 2: four stores per partition).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.core.model import Checkpoint, Operator
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.progress import ProgressSink
from ckpt_cli.state.reader import decoder_for

SIDES = ("left", "right")
COUNTS = tuple(f"{side}-keyToNumValues" for side in SIDES)
INDEXED = tuple(f"{side}-keyWithIndexToValue" for side in SIDES)
STORES = (COUNTS[0], INDEXED[0], COUNTS[1], INDEXED[1])  # Spark's order (commit log ids)


def is_join(op: Operator) -> bool:
    """A stream-stream join of state format 1 or 2 (its four stores)."""
    return set(op.stores) == set(STORES)


@dataclass
class JoinMatch:
    """Per partition: ``(join keys, matched join keys, bytes of the removed records)``; the
    removed keys per ``(store, partition)``."""

    counts: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    removals: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)


def _join_key(key: Any, indexed: bool) -> str:
    """A join key as text: an indexed store's key without its trailing ``index``."""
    items = list(key.items())
    return json.dumps(items[:-1] if indexed else items, sort_keys=True, default=str)


def match_join(
    ckpt: Checkpoint,
    operator: int,
    last: int,
    test: Callable[[dict[str, Any]], bool],
    keys_only: bool,
    emit: Callable[[dict[str, Any]], None],
    progress: ProgressSink,
) -> JoinMatch:
    """The join keys of ``operator`` at batch ``last`` whose count row on either side
    matches ``test``, and every record of them in the four stores; ``emit`` gets each
    removed record's row (with its ``store``)."""
    out = JoinMatch()
    partitions = sorted(ckpt.operators[operator].stores[COUNTS[0]].partitions)
    decoders = {store: decoder_for(ckpt, operator, store) for store in STORES}
    progress.start("Matching keys", total=len(partitions))
    try:
        for partition in partitions:
            seen: set[str] = set()
            matched: set[str] = set()
            for store in COUNTS:
                decoder = decoders[store]
                version = plan_version(ckpt, operator, partition, last + 1, store=store)
                for key, value in iter_state(ckpt, version):
                    json_key = decoder.json_key(key)
                    seen.add(_join_key(json_key, False))
                    if keys_only:
                        row = {"partition_id": partition, "key": json_key}
                    else:
                        row = decoder.row(partition, key, value)
                    if test(row):
                        matched.add(_join_key(json_key, False))
            size = 0
            if matched:
                for store in STORES:
                    decoder = decoders[store]
                    version = plan_version(ckpt, operator, partition, last + 1, store=store)
                    for key, value in iter_state(ckpt, version):
                        if _join_key(decoder.json_key(key), store in INDEXED) in matched:
                            out.removals.setdefault((store, partition), []).append(key)
                            size += len(key) + len(value)
                            emit({"store": store, **decoder.row(partition, key, value)})
            out.counts[partition] = (len(seen), len(matched), size)
            progress.advance()
    finally:
        progress.close()
    return out
