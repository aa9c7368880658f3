"""A cleanup plan: the files no retained version needs, by class, in a crash-safe deletion order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckpt_cli.results import FieldsJson, Result, fields_json

if TYPE_CHECKING:
    from ckpt_cli.core.activity import Activity

# Deletion classes (codes in the JSON, like validate's finding codes), in the order they are
# deleted.
TEMP = "TEMP"
LOST_ATTEMPT = "LOST_ATTEMPT"
OLD_VERSION = "OLD_VERSION"
OLD_PARTITION = "OLD_PARTITION"
OLD_LOG = "OLD_LOG"
OLD_SOURCE_LOG = "OLD_SOURCE_LOG"
OLD_SHARED = "OLD_SHARED_FILE"
ORPHAN_SHARED = "ORPHAN_SHARED_FILE"
CHECKSUM = "CHECKSUM"
CLASSES = (
    TEMP,
    LOST_ATTEMPT,
    OLD_VERSION,
    OLD_PARTITION,
    OLD_LOG,
    OLD_SOURCE_LOG,
    OLD_SHARED,
    ORPHAN_SHARED,
    CHECKSUM,
)
PHASE = {
    TEMP: 0,
    LOST_ATTEMPT: 1,
    OLD_VERSION: 2,
    OLD_PARTITION: 2,
    OLD_LOG: 3,
    OLD_SOURCE_LOG: 3,
    OLD_SHARED: 4,
    ORPHAN_SHARED: 4,
    CHECKSUM: 5,
}
DESCRIPTIONS = {
    TEMP: "temp files of interrupted atomic writes",
    LOST_ATTEMPT: "format-v2 state files of task attempts the commit log did not choose",
    OLD_VERSION: "state files of versions older than the retention window",
    OLD_PARTITION: "partition directories beyond the partition count (left by a repartition)",
    OLD_LOG: "offsets/ and commits/ entries older than the retention window",
    OLD_SOURCE_LOG: "file-source log entries superseded by a newer compact file",
    OLD_SHARED: "RocksDB SST/log files only old versions name",
    ORPHAN_SHARED: "RocksDB SST/log files no zip names",
    CHECKSUM: "checksum sidecars whose file is removed or gone",
}


@dataclass
class Deletion:
    path: str
    size: int
    mtime: float | None
    klass: str
    reason: str
    # Ordering within a phase: version (state files) or batch (logs).
    order: int = 0
    # For a checksum sidecar: the file it covers (deleted right after it).
    covers: str | None = None
    phase: int = 0

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, "path size class=klass reason mtime")


@dataclass(frozen=True)
class Skipped(FieldsJson):
    """A directory or link cleanup leaves whole, and why."""

    path: str
    reason: str


@dataclass
class CleanupPlan(Result):
    """What cleanup would delete, in order. As the result of ``ckpt orphans``, it has problems
    when it deletes anything (a cron job can alert)."""

    checkpoint: str
    retain: int
    retain_source: str
    min_age: float
    now: float
    latest_committed: int | None
    deletions: list[Deletion] = field(default_factory=list)
    kept_young: list[Deletion] = field(default_factory=list)
    # Files no retained version needs that Spark's own rules keep (shown, never deleted).
    kept: list[Deletion] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    activity: Activity | None = None  # whether the query looks active, and why
    # What applying would refuse, said instead (a dry run never refuses), and signals that
    # disagree (a copy or restore).
    warnings: list[str] = field(default_factory=list)

    @property
    def query_active(self) -> bool:
        return self.activity is not None and self.activity.active

    @property
    def bytes(self) -> int:
        return sum(d.size for d in self.deletions)

    def by_class(self) -> dict[str, dict[str, int]]:
        out = {c: {"files": 0, "bytes": 0} for c in CLASSES}
        for d in self.deletions:
            out[d.klass]["files"] += 1
            out[d.klass]["bytes"] += d.size
        return {c: v for c, v in out.items() if v["files"]}

    @property
    def ok(self) -> bool:
        return not self.deletions

    def body_json(self) -> dict[str, Any]:
        # Also what manifests, scans and cleanup's own document hold.
        return fields_json(
            self,
            "checkpoint retain retain_source min_age_seconds=min_age latest_committed query_active"
            " activity warnings files bytes by_class deletions kept_too_young=kept_young kept"
            " skipped",
            files=len(self.deletions),
            by_class=self.by_class(),
        )


def delete_order(d: Deletion) -> tuple[int, int, str, int]:
    # A sidecar sorts right after the file it covers.
    return d.phase, d.order, d.covers or d.path, 1 if d.covers else 0
