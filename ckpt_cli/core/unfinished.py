"""A repartition that was started and not committed, by ckpt or by Spark; a conversion
(``ckpt convert``) likewise.

Spark's rule (``OfflineStateRepartitionUtils.isRepartitionBatch``): a batch whose offsets entry
pins another ``spark.sql.shuffle.partitions`` than the batch before it. When that batch is the
newest offsets entry and has no commit, the repartition is unfinished: Spark 4.2+ refuses to
start the query (``STREAMING_UNFINISHED_REPARTITION_DETECTED``) until it is finished (a
repartition to the same count) or rolled back (the offsets entry and the state it wrote
removed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.model import DEFAULT_STORE, Checkpoint, FileKind, Store
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats.logs import PROVIDER_CLASS
from ckpt_cli.formats.names import CKPT_LOCK_NAME
from ckpt_cli.results import fields_json


@dataclass(frozen=True)
class UnfinishedRepartition:
    """``offsets/<batch>`` changes the partition count from ``from_partitions`` to
    ``to_partitions`` and ``commits/<batch>`` is missing. ``state_files``: the state files at
    version ``batch + 1`` (what the attempt wrote, SSTs not included)."""

    batch: int
    from_partitions: int
    to_partitions: int
    state_files: tuple[str, ...]

    @property
    def version(self) -> int:
        return self.batch + 1

    def describe(self) -> str:
        return (
            f"offsets/{self.batch} changes spark.sql.shuffle.partitions from "
            f"{self.from_partitions} to {self.to_partitions} and batch {self.batch} has no "
            "commit: a repartition (by ckpt or by Spark) was interrupted; Spark refuses to "
            "start the query until it is finished or rolled back"
        )

    @property
    def hint(self) -> str:
        """The commands that finish it or roll it back (Spark's own attempt has no ckpt
        manifest to undo from: repair rolls back either)."""
        return (
            f"ckpt repartition CHECKPOINT --partitions {self.to_partitions} --apply finishes "
            "it; ckpt repair rolls it back"
        )

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, "batch from_partitions to_partitions state_files")


def find_unfinished_repartition(ckpt: Checkpoint) -> UnfinishedRepartition | None:
    """The unfinished repartition of ``ckpt``, or None. Unreadable log entries are not
    judged here (``validate`` reports them): None."""
    batches = ckpt.batches
    batch = batches.latest_offsets
    if batch is None or batch == 0 or batch in batches.commits:
        return None
    if batch - 1 not in batches.offsets:
        return None
    try:
        new = ckpt.offsets(batch).shuffle_partitions
        old = ckpt.offsets(batch - 1).shuffle_partitions
    except FormatError:
        return None
    if new is None or old is None or new == old:
        return None
    version = batch + 1
    written = tuple(
        f.path
        for f in ckpt.of_kind(FileKind.SNAPSHOT, FileKind.DELTA, FileKind.ZIP, FileKind.CHANGELOG)
        if f.version == version
    )
    return UnfinishedRepartition(batch, old, new, written)


@dataclass(frozen=True)
class UnfinishedConversion:
    """``offsets/<batch>`` pins another state store provider class (``to_class``) than the
    batch before it (``from_class``; None: unset, Spark's default HDFS-backed store) and
    ``commits/<batch>`` is missing: a ``ckpt convert`` was interrupted. A restart re-runs the
    batch with the new provider, which has no state of the version it loads, and fails."""

    batch: int
    from_class: str | None
    to_class: str

    def describe(self) -> str:
        old = (self.from_class or "the default HDFSBackedStateStoreProvider").rsplit(".")[-1]
        return (
            f"offsets/{self.batch} changes the state store provider from {old} to "
            f"{self.to_class.rsplit('.')[-1]} and batch {self.batch} has no commit: a "
            "conversion (ckpt convert) was interrupted; a restart fails loading the new "
            "provider's state"
        )


def find_unfinished_conversion(ckpt: Checkpoint) -> UnfinishedConversion | None:
    """The interrupted provider conversion of ``ckpt``, or None (unreadable log entries
    too: ``validate`` reports them)."""
    batches = ckpt.batches
    batch = batches.latest_offsets
    if batch is None or batch == 0 or batch in batches.commits or batch - 1 not in batches.offsets:
        return None
    try:
        new = ckpt.offsets(batch).conf.get(PROVIDER_CLASS)
        old = ckpt.offsets(batch - 1).conf.get(PROVIDER_CLASS)
    except FormatError:
        return None
    if new is None or new == old:
        return None
    return UnfinishedConversion(batch, old, new)


def other_provider_stores(ckpt: Checkpoint) -> list[str]:
    """The store paths holding files of another provider than the offsets conf names: what
    an interrupted ``ckpt convert`` leaves (its new files, or the old ones not moved yet);
    with :func:`other_format_stores`, those of another checkpoint format."""
    return other_format_stores(ckpt) + [
        f"{op.path}" + (f" store {name}" if name != DEFAULT_STORE else "")
        for op in ckpt.operators.values()
        for name, store in op.stores.items()
        if store.other_provider_files
    ]


def other_format_stores(ckpt: Checkpoint) -> list[str]:
    """The store paths holding RocksDB files of a version past the restart's (newer than the
    last committed batch + 1) in the other checkpoint format than the newest commit pins
    (``<v>_<uniqueId>`` names in v1, plain ``<v>`` names in v2): what an interrupted
    ``ckpt convert --format-version`` leaves. Spark writes such versions only in its own
    format."""
    last = ckpt.batches.latest_committed
    if last is None:
        return []
    v2 = ckpt.checkpoint_format_version >= 2
    kinds = (FileKind.ZIP, FileKind.CHANGELOG)
    return [
        f"{op.path}" + (f" store {name}" if name != DEFAULT_STORE else "")
        for op in ckpt.operators.values()
        for name, store in op.stores.items()
        if any(
            f.kind in kinds and (f.version or 0) > last + 1 and (f.unique_id is None) == v2
            for part in store.partitions.values()
            for f in part.files
        )
    ]


def unique_id_zips_in_v1(ckpt: Checkpoint) -> list[str]:
    """Zips named ``<v>_<uniqueId>`` in a checkpoint whose newest commit is format v1: Spark's
    format-v1 loader parses every zip name of a partition as a version (4.3:
    ``AutoSnapshotLoader.getEligibleSnapshotsForVersion``), so one such zip fails its
    restart (NumberFormatException)."""
    if ckpt.batches.latest_committed is None or ckpt.checkpoint_format_version >= 2:
        return []
    return [f.path for f in ckpt.of_kind(FileKind.ZIP) if f.unique_id is not None]


def interrupted_in_quarantine(ckpt: Checkpoint, prefix: str) -> bool:
    """Whether the newest run of a change (its quarantine ``<checkpoint>.ckpt-quarantine/
    <prefix><stamp>/``) left its manifest incomplete and not undone: a kill part way. Looked
    for only where a killed run left its lock (and a state error asks whose it is): one
    listing beside the checkpoint, no request for a checkpoint no command was killed in."""
    if ckpt.listing.get(CKPT_LOCK_NAME) is None:
        return False
    storage = ckpt.storage
    folder = storage.elsewhere(f"{storage.root.rstrip('/')}.ckpt-quarantine")
    try:
        names = sorted(
            e.path
            for e in folder.list_all()
            if e.path.startswith(prefix) and e.path.endswith("/manifest.json")
        )
    except CkptError:
        return False
    if not names:
        return False
    try:
        body = json.loads(folder.read_bytes(names[-1]))
    except (CkptError, ValueError):
        return False
    return isinstance(body, dict) and not body.get("complete") and not body.get("undone")


def partition_count_since(ckpt: Checkpoint) -> tuple[int, int] | None:
    """``(count, batch)``: the latest committed batch's ``spark.sql.shuffle.partitions`` and
    the first batch of the newest run of retained offsets entries with that count (the
    repartition batch when an older entry has another count). None when unreadable."""
    b = ckpt.batches
    last = b.latest_committed
    if last is None or last not in b.offsets:
        return None
    try:
        count = ckpt.offsets(last).shuffle_partitions
        first = last
        while first - 1 in b.offsets and ckpt.offsets(first - 1).shuffle_partitions == count:
            first -= 1
    except FormatError:
        return None
    return (count, first) if count is not None else None


def batch_partitions(ckpt: Checkpoint, store: Store) -> list[int]:
    """The ids of a store's partitions that a new batch covers, in order: all but those a
    repartition to fewer partitions left over, which Spark never loads again (their
    versions stop where the count changed: a new version cannot be built on them)."""
    left = left_over_partitions(ckpt)
    return sorted(p for p, part in store.partitions.items() if part.path not in left)


def left_over_partitions(ckpt: Checkpoint) -> dict[str, int]:
    """Store partition directories beyond the partition count that no batch since the count
    changed wrote (a repartition to fewer partitions leaves them): path -> partition id."""
    b = ckpt.batches
    last = b.latest_committed
    if last is None or b.latest_offsets != last or last not in b.offsets:
        return {}
    try:
        count = ckpt.offsets(last).shuffle_partitions
    except FormatError:
        return {}
    beyond = [
        part
        for op in ckpt.operators.values()
        for store in op.stores.values()
        for part in store.partitions.values()
        if count is not None and part.id >= count
    ]
    # Walking back over the offsets entries costs a read each: only when there is a candidate.
    since = partition_count_since(ckpt) if beyond else None
    if since is None:
        return {}
    count, first = since
    return {part.path: part.id for part in beyond if all(v <= first for v in part.versions)}
