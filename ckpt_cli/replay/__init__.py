"""Replay: the state of a store at a batch (or the changes between two batches), decoded with
its schema, in the row shape of Spark's ``statestore`` source.

    >>> from ckpt_cli.replay import read_state
    >>> rows = read_state("s3://bucket/query", operator=0, partitions=[3])
    >>> rows.to_pandas()          # or rows.to_arrow(), or: for row in rows: ...

Data flows down one path, a module a step:

``target``
    what to read: batch -> store version, operator, store, partitions (``ReplayTarget``).
``plan``
    which files rebuild each partition's version: snapshot + deltas, zip + changelogs, the
    format-v2 lineage; for the change feed one delta/changelog per batch (``ReplayPlan``).
``read``
    the files' bytes -> raw key/value records per provider, and a plan's state rebuilt from
    them (``iter_state``), streamed.
``rows``
    raw records -> rows with plain JSON values; one encoder (``RowDecoder``) behind JSON
    lines, CSV and Arrow/parquet.
``bulk``, ``columns``, ``plain_arrow``
    the same rows in columns: a partition merged in bulk (HDFS), records decoded into Arrow
    a batch at a time, Arrow tables and JSON lines built column by column.
``source``
    the steps assembled for a target (every partition, best-effort fallbacks noted):
    ``read_state`` -> ``StateRows``.
``sinks``, ``ordered``, ``datasets``
    stdout or a file (JSON lines, CSV, parquet), written through ``Storage``: partitions
    side by side in threads (``ordered``) or worker processes; partitioned datasets on an
    engine (local pools or Spark), a file per partition.

New state formats (transformWithState column families, Avro-encoded rows...) plug in at
``read`` (records of their files, e.g. a column family per record) and ``rows`` (a decoder
for their bytes giving the same row shape); target, plan, source and sinks stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckpt_cli.state.reader import StateRows, read_state

__all__ = ["StateRows", "read_state"]


def __getattr__(name: str) -> Any:
    # Imported on first use: ``plan`` alone (validate's restart check, ``ckpt versions``)
    # then does not import the readers, decoders and Arrow code behind ``source``.
    if name in __all__:
        from ckpt_cli.state import reader as source

        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
