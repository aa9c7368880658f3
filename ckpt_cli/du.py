"""``ckpt du``: where the bytes of a checkpoint are, from the one listing (no state file is
read; the latest offsets entry names the store provider).

Sizes and file counts by file class (:class:`~ckpt_cli.core.layout.FileKind`), by top-level area
(``offsets/``, ``commits/``, ``sources/``, ``state/``...), per operator and store, and per
state partition; the largest partitions, and each store's skew: its largest partition's bytes
over the median partition's (1.0 is even; state is hash-partitioned by key, so a large skew
means a few hot keys).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.model import Checkpoint, CheckpointFile
from ckpt_cli.results import Report, fields_json
from ckpt_cli.units import natural_key

DEFAULT_TOP = 10


@dataclass(frozen=True)
class Usage:
    files: int
    bytes: int

    @staticmethod
    def of(files: list[CheckpointFile]) -> Usage:
        return Usage(len(files), sum(f.entry.size for f in files))

    def to_json(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes}


@dataclass(frozen=True)
class PartitionUsage:
    operator: int
    store: str
    partition: int
    path: str
    usage: Usage

    def to_json(self) -> dict[str, Any]:
        return {**fields_json(self, "operator store partition path"), **self.usage.to_json()}


@dataclass(frozen=True)
class StoreUsage:
    operator: int
    name: str
    usage: Usage
    partitions: list[PartitionUsage]

    @property
    def median_bytes(self) -> float:
        return statistics.median(p.usage.bytes for p in self.partitions) if self.partitions else 0

    @property
    def max_bytes(self) -> int:
        return max((p.usage.bytes for p in self.partitions), default=0)

    @property
    def skew(self) -> float | None:
        """Largest partition over the median one (None: no partitions, or a median of 0)."""
        median = self.median_bytes
        return round(self.max_bytes / median, 2) if median else None

    def to_json(self, summarize: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            **self.usage.to_json(),
            "num_partitions": len(self.partitions),
            "median_partition_bytes": self.median_bytes,
            "max_partition_bytes": self.max_bytes,
            "skew": self.skew,
        }
        if not summarize:
            out["partitions"] = [p.to_json() for p in self.partitions]
        return out


@dataclass(frozen=True)
class OperatorUsage:
    id: int
    path: str
    usage: Usage  # every file under state/<op>, its metadata and schemas included
    stores: list[StoreUsage]


@dataclass(frozen=True)
class DiskUsageReport(Report):
    """A description (exit 0): where the bytes are."""

    checkpoint: str
    total: Usage
    by_class: dict[str, Usage]
    by_area: dict[str, Usage]
    operators: list[OperatorUsage]
    largest: list[PartitionUsage]
    summarize: bool

    def body_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            **self.total.to_json(),
            "by_class": {k: u.to_json() for k, u in self.by_class.items()},
            "by_area": {k: u.to_json() for k, u in self.by_area.items()},
            "operators": [
                {
                    "id": op.id,
                    "path": op.path,
                    **op.usage.to_json(),
                    "stores": [s.to_json(self.summarize) for s in op.stores],
                }
                for op in self.operators
            ],
            "largest_partitions": [p.to_json() for p in self.largest],
        }


def _grouped(files: list[CheckpointFile], key: Any) -> dict[str, Usage]:
    groups: dict[str, list[CheckpointFile]] = {}
    for f in files:
        groups.setdefault(key(f), []).append(f)
    by_size = sorted(groups.items(), key=lambda kv: (-Usage.of(kv[1]).bytes, kv[0]))
    return {name: Usage.of(group) for name, group in by_size}


def _area(f: CheckpointFile) -> str:
    """``offsets/``, ``state/``...; files at the root (``metadata`` and its sidecar) are ``.``."""
    head, sep, _ = f.path.partition("/")
    return head + "/" if sep else "."


def disk_usage(
    checkpoint: Checkpoint, *, top: int = DEFAULT_TOP, summarize: bool = False
) -> DiskUsageReport:
    """Bytes and file counts of ``checkpoint`` by class, area, operator, store and partition;
    the ``top`` largest partitions. ``summarize``: no per-partition lists."""
    # Tolerant: a damaged log entry (whose conf names the provider) changes no size.
    checkpoint = checkpoint.tolerant_view()
    files = checkpoint.files
    operators = []
    every: list[PartitionUsage] = []
    for op in checkpoint.operators.values():
        stores = []
        for store in op.stores.values():
            parts = [
                PartitionUsage(op.id, store.name, p.id, p.path, Usage.of(p.files))
                for p in store.partitions.values()
            ]
            every.extend(parts)
            in_store = [f for p in store.partitions.values() for f in p.files]
            stores.append(StoreUsage(op.id, store.name, Usage.of(in_store), parts))
        under = [f for f in files if f.path.startswith(op.path + "/")]
        operators.append(OperatorUsage(op.id, op.path, Usage.of(under), stores))
    largest = sorted(every, key=lambda p: (-p.usage.bytes, natural_key(p.path)))[: max(top, 0)]
    return DiskUsageReport(
        checkpoint=checkpoint.storage.url,
        total=Usage.of(files),
        by_class=_grouped(files, lambda f: f.kind.value),
        by_area=_grouped(files, _area),
        operators=operators,
        largest=largest,
        summarize=summarize,
    )
