"""The state one validation run shares between its checks: the options, the findings so far,
and the files queued for the decoding pool."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from functools import cached_property
from operator import attrgetter
from typing import Any

from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.rebuild import ReplayPlan, codec_of
from ckpt_cli.core.unfinished import interrupted_in_quarantine, other_format_stores
from ckpt_cli.core.untracked import unchosen_attempt
from ckpt_cli.errors import CkptError
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.validate.codes import CODES
from ckpt_cli.validate.files import FileTask
from ckpt_cli.validate.report import Finding

_entry_path = attrgetter("entry.path")
_STREAM_KINDS = (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG)


class ValidationRun:
    """What the checks of one ``validate`` call read and add to. Each check module has
    functions taking the run; :func:`ckpt_cli.validate.runner.validate` calls them in order."""

    def __init__(
        self, ckpt: Checkpoint, *, batch: int | None, all_versions: bool, deep: bool
    ) -> None:
        self.ckpt = ckpt
        self.batch = batch
        self.all_versions = all_versions
        self.deep = deep
        # Every retained version is in scope, not only what a restart reads.
        self.every = all_versions or deep
        self.findings: list[Finding] = []
        self.needed_logs: set[str] = set()  # log entries a restart reads
        self.tasks: dict[str, FileTask] = {}  # files for the pool, by path
        self.versions_checked = 0
        # Restart scope: SST/log files the zips read within the budget leave unnamed.
        self.orphans_unresolved = 0
        self.zip_metadata: dict[str, rocksdb_zip.RocksDBCheckpointMetadata] = {}
        # The plans of the version a restart loads, one per store partition.
        self.restart_plans: list[ReplayPlan] = []
        # Changelogs whose lineage is checked: one read and one finding each.
        self.lineage_checked: set[str] = set()
        self.sidecars_checked: set[str] = set()  # verified outside the pool (source logs)
        # Files Spark would read that are behind a symbolic link (not listed), by link.
        self.behind_links: dict[str, set[str]] = {}

    @cached_property
    def other_format_stores(self) -> frozenset[str]:
        """Stores an interrupted ``ckpt convert --format-version`` left files in."""
        return frozenset(other_format_stores(self.ckpt))

    @cached_property
    def conversion_interrupted(self) -> bool:
        """A ``ckpt convert`` killed part way (its manifest beside the checkpoint)."""
        return interrupted_in_quarantine(self.ckpt, "convert-")

    def missing_targets(self, files: Iterable[CheckpointFile]) -> set[str]:
        """The targets of ``files`` (checksum sidecars) that are not listed: one pass in C
        over the listing's paths, no index kept."""
        targets = {f.target for f in files if f.target}
        return targets.difference(map(_entry_path, self.ckpt.files)) if targets else targets

    def add(
        self,
        code: str,
        message: str,
        paths: Iterable[str] = (),
        *,
        severity: str | None = None,
        hint: str | None = None,
        **details: Any,
    ) -> None:
        default, default_hint = CODES[code]
        self.findings.append(
            Finding(code, severity or default, message, list(paths), hint or default_hint, details)
        )

    def target_version(self) -> int | None:
        """The state version a restart loads: the latest (or ``--batch``) commit + 1."""
        if self.batch is not None:
            return self.batch + 1
        latest = self.ckpt.batches.latest_committed
        return latest + 1 if latest is not None else None

    def queue(self, f: CheckpointFile) -> None:
        """Have the pool decode ``f`` end to end and verify its checksum sidecars."""
        if f.path in self.tasks:
            return
        sidecars = tuple((c.path, c.kind) for c in self.ckpt.sidecars_of(f.path))
        shared: tuple[tuple[str, int], ...] = ()
        if self.deep and f.kind is FileKind.ZIP and f.store is not None:
            # Only a deep check rebuilds the RocksDB from them.
            shared = self._shared_by_dir.get(f.path.rsplit("/", 1)[0], ())
        self.tasks[f.path] = FileTask(
            f.path, f.kind, f.entry.size, codec_of(self.ckpt), sidecars, self.deep, shared
        )

    def hold_back_streams(self, limit: int) -> list[FileTask]:
        """Take the deltas, snapshots and changelogs out of the queue when they total more
        than ``limit`` bytes (a quick verdict does not decode them); returns them."""
        streams = [t for t in self.tasks.values() if t.kind in _STREAM_KINDS]
        if sum(t.size for t in streams) <= limit:
            return []
        for t in streams:
            del self.tasks[t.path]
        return streams

    @functools.cached_property
    def _shared_by_dir(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """SSTs/logs present, with sizes, by store directory (one pass over the listing, not
        one per zip)."""
        found: dict[str, list[tuple[str, int]]] = {}
        for e in self.ckpt.listing:
            parts = e.path.rsplit("/", 2)
            if len(parts) == 3 and parts[1] in ("SSTs", "logs"):
                found.setdefault(parts[0], []).append((e.path, e.size))
        return {d: tuple(files) for d, files in found.items()}

    def unchosen(self, op: int, store: str, pid: int, f: CheckpointFile) -> str | None:
        """The uniqueId the commit log chose for ``f``'s version when ``f`` is of another
        attempt (None: it is the chosen one, or the commit is unreadable or purged)."""
        try:
            return unchosen_attempt(self.ckpt, op, store, pid, f)
        except CkptError:
            return None  # an unreadable commit is reported by check_logs

    def link_of(self, path: str) -> str | None:
        """The symbolic link ``path`` is, or is under (None: none)."""
        links = self.ckpt.listing.symlinks
        if not links:
            return None
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if prefix in links:
                return prefix
        return None
