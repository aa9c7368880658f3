"""Partition directories beyond the query's partition count: what a repartition to fewer
partitions leaves (Spark's own repartition leaves them too). They are removable once no
retained batch runs with the old count (restarting one of those would need them)."""

from __future__ import annotations

from ckpt_cli.cleanup.plan import Skipped
from ckpt_cli.core.model import Checkpoint, Partition
from ckpt_cli.core.unfinished import left_over_partitions, partition_count_since


def partitions_beyond_count(
    ckpt: Checkpoint, retain: int
) -> tuple[list[tuple[Partition, str]], list[Skipped]]:
    """Left-over partitions (:func:`left_over_partitions`) with the reason they can go, and
    those kept because a retained batch still has the old count."""
    left = left_over_partitions(ckpt)
    since = partition_count_since(ckpt)
    if not left or since is None:
        return [], []
    count, first = since
    last = ckpt.batches.latest_committed
    assert last is not None  # partition_count_since found it
    old_layout_retained = first - 1 in ckpt.batches.commits and last - retain < first
    removable: list[tuple[Partition, str]] = []
    kept: list[Skipped] = []
    for op in ckpt.operators.values():
        for store in op.stores.values():
            for part in store.partitions.values():
                if part.path not in left:
                    continue
                beyond = f"partition {part.id} is beyond the query's {count} partitions"
                if old_layout_retained:
                    why = f"{beyond} since batch {first}, but batch {first - 1} is retained"
                    kept.append(Skipped(part.path, why))
                else:
                    removable.append((part, beyond))
    return removable, kept
