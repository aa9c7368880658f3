"""``ckpt replay``: a store's state (or its change feed) written where it goes.

    >>> from ckpt_cli.replay import read_state
    >>> rows = read_state("s3://bucket/query", operator=0, partitions=[3])
    >>> rows.to_pandas()          # or rows.to_arrow(), or: for row in rows: ...

Reading the state is ``ckpt_cli.state`` (what the rows are, below every command) and
``ckpt_cli.core`` (which files rebuild a version, and their records); this package writes
them:

``run``
    ``ckpt replay`` as one call (``run_replay`` -> ``ReplayRun``): read, then write to a
    stream, a file or a dataset, or keep the first rows for a table or ``--json``.
``sinks``
    JSON lines, CSV and Parquet onto a stream or a file, partitions side by side in threads
    (``state.ordered``) or worker processes, in partition order.
``csv_arrow``
    CSV through Arrow's writer, byte for byte what Spark's ``df.write.csv`` writes.
``datasets``
    a folder per partition (``partition_id=<p>/``), on an engine (local pools or Spark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ckpt_cli.state.reader import StateRows, read_state

__all__ = ["StateRows", "read_state"]

# Imported on first use: ``plan`` alone (validate's restart check, ``ckpt versions``) then
# does not import the readers, decoders and Arrow code behind the reader.
__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "ckpt_cli.state.reader"))
