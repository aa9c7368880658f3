"""``ckpt repair``: the known repairs of a broken checkpoint, as planned, reversible actions.

The plan starts from ``validate``'s findings:

* **quarantine** temp files of interrupted writes, checksum sidecars of files that are gone,
  and empty/truncated/corrupt state files of versions after the last committed one;
* **roll back** to batch N (``--rollback-to N``, or proposed when the state of the latest
  committed batch cannot be loaded or its log entries cannot be read): the ``commits/`` and
  ``offsets/`` entries after N and the state files of versions after N+1 are quarantined, so
  Spark re-runs from batch N+1;
* **fix checksums**: rewrite Hadoop ``.crc`` (and Spark ``<name>.crc``) sidecars that no longer
  match a file that itself reads correctly;
* **re-snapshot** (``--snapshot``, HDFS-backed stores): write ``V.snapshot`` for the restart
  version of every partition from replayed state, in Spark's record format and codec.

Nothing is deleted: files leave the checkpoint by moving into a quarantine folder beside it,
rewritten files' originals go there too, and a manifest lists every change so ``undo``
restores the checkpoint byte for byte. Every apply ends with ``validate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.change.safety import links_refused
from ckpt_cli.core.model import CHECKSUM_KINDS, Checkpoint, FileKind
from ckpt_cli.core.unfinished import find_unfinished_repartition
from ckpt_cli.errors import CkptError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Result, fields_json
from ckpt_cli.units import natural_key
from ckpt_cli.validate import ERROR, Finding, validate
from ckpt_cli.validate.repartition import attempt_files

QUARANTINE = "quarantine"
REWRITE_CRC = "rewrite_checksum"
WRITE_SNAPSHOT = "write_snapshot"

# Findings a rollback can cure (they are about the latest batches' logs or state).
_ROLLBACK_CODES = {
    "CORRUPT_OFFSETS",
    "CORRUPT_COMMIT",
    "COMMIT_WITHOUT_OFFSETS",
    "BATCH_GAP",
    "UNCOMMITTED_BATCH",
    "MISSING_STATE_FILE",
    "MISSING_SST",
    "SST_SIZE_MISMATCH",
    "LINEAGE_MISMATCH",
    "MISSING_UNIQUE_ID_FILE",
    "EMPTY_FILE",
    "TRUNCATED_FILE",
    "CORRUPT_FILE",
    "UNFINISHED_REPARTITION",
}
# Findings no repair here can cure.
_REFUSE_CODES = {
    "MISSING_METADATA": "the root metadata file (the query id) is missing",
    "CORRUPT_METADATA": "the root metadata file (the query id) is unreadable",
    "PARTITION_COUNT_MISMATCH": "state partitions are missing or extra",
    "CORRUPT_SCHEMA": "a state schema file is unreadable",
    # Beyond ckpt's limits the file is not read, so whether it is damaged is unknown.
    "LIMIT_EXCEEDED": "a file is beyond ckpt's safety limits (raise the limit to check it)",
    # Not damage: the Spark that wrote the file may read it; rolling back would discard it.
    "UNSUPPORTED_VERSION": "a file has a version ckpt does not read (maybe a newer Spark's)",
    "UNKNOWN_LOG_VERSION": "a log entry has a version ckpt does not read (maybe a newer Spark's)",
}


@dataclass
class Action:
    kind: str
    path: str
    reason: str
    order: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.kind, "path": self.path, "reason": self.reason, **self.details}


@dataclass
class RepairPlan(Result):
    """The repairs to make; ``refused`` when the damage is beyond them (then nothing is done).
    Problems when there is anything to repair."""

    checkpoint: str
    findings: list[Finding]
    actions: list[Action] = field(default_factory=list)
    rollback_to: int | None = None
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What applying would refuse, said instead (a dry run never refuses), and signals of the
    # query's activity that disagree (a copy or restore).
    warnings: list[str] = field(default_factory=list)
    # The errors repair leaves as they are, each with why: {code, paths, message, why,
    # restart} (restart: whether a restart from the latest batch needs what it is about).
    left: list[dict[str, Any]] = field(default_factory=list)
    # What the plan judged, in words (the scopes of validate it read).
    scope: str = ""

    @property
    def ok(self) -> bool:
        # Problems while there is something to repair, or errors a restart hits that no
        # repair here cures (left, with why).
        return not self.actions and not any(f["restart"] for f in self.left)

    def body_json(self) -> dict[str, Any]:
        # Also what manifests and the repair's own document hold.
        return fields_json(
            self,
            "checkpoint rollback_to actions refused notes left scope warnings"
            " findings_before=findings",
        )


# -- planning ------------------------------------------------------------------------------------


def _batch_restartable(ckpt: Checkpoint, batch: int) -> str | None:
    """None when Spark can restart after ``batch``, else why not: its log entries read, and
    every store partition's version batch+1 can be planned and its files decode."""
    if batch not in ckpt.batches.commits or batch not in ckpt.batches.offsets:
        return f"batch {batch} has no commit or offsets entry"
    report = validate(ckpt, batch=batch)
    bad = [
        f
        for f in report.findings
        if f.severity == ERROR
        # Log findings after the batch go with the rollback; a checksum sidecar of a file that
        # reads correctly is rewritten by the same repair.
        and f.code not in ("UNCOMMITTED_BATCH", "COMMIT_WITHOUT_OFFSETS", "BATCH_GAP")
        and not _crc_only(f, report.findings)
        and not _beyond(f, batch)
    ]
    return bad[0].message if bad else None


def _crc_only(f: Finding, findings: list[Finding]) -> bool:
    """A CRC_MISMATCH whose covered file has no problem of its own."""
    if f.code != "CRC_MISMATCH" or len(f.paths) != 2:
        return False
    main = f.paths[1]
    return not any(x is not f and main in x.paths for x in findings)


def _beyond(f: Finding, batch: int) -> bool:
    """A finding only about log entries after ``batch`` (a rollback to it removes them)."""
    batches = []
    for path in f.paths:
        head, _, name = path.partition("/")
        if head in ("offsets", "commits") and name.isdigit():
            batches.append(int(name))
        elif not path.startswith(("offsets/.", "commits/.")):
            return False
    return bool(batches) and min(batches) > batch


def plan_repair(
    ckpt: Checkpoint,
    *,
    rollback_to: int | None = None,
    snapshot: bool = False,
    progress: ProgressSink = NULL_PROGRESS,
) -> RepairPlan:
    report = validate(ckpt, progress=progress)
    plan = RepairPlan(ckpt.storage.url, report.findings)
    plan.refused.extend(links_refused(ckpt))
    for finding in report.findings:
        if finding.code in _REFUSE_CODES:
            plan.refused.append(f"{_REFUSE_CODES[finding.code]}: {finding.message}")
    if plan.refused:
        return plan
    planned: set[str] = set()
    repartition_only = False  # the rollback removes only an unfinished repartition

    def add(kind: str, path: str, reason: str, order: int = 0, **details: Any) -> None:
        if path in planned:
            return
        planned.add(path)
        plan.actions.append(Action(kind, path, reason, order, details))
        if kind == QUARANTINE:
            for side in ckpt.sidecars_of(path):
                add(QUARANTINE, side.path, f"checksum of {path}, which is quarantined", order)

    # Roll back when the latest committed batch cannot restart.
    latest = ckpt.batches.latest_committed
    needs_rollback = any(f.severity == ERROR and f.code in _ROLLBACK_CODES for f in report.findings)
    target = rollback_to
    if target is None and needs_rollback and latest is not None:
        for candidate in sorted(ckpt.batches.commits, reverse=True):
            if _batch_restartable(ckpt, candidate) is None:
                target = candidate
                break
        if target is None:
            plan.refused.append(
                "no retained committed batch can be restarted from (every one has missing "
                "or broken state); nothing to roll back to"
            )
            return plan
    if target is not None:
        if latest is not None and target > latest:
            raise CkptError(f"rollback_to={target}: the latest committed batch is {latest}")
        why = _batch_restartable(ckpt, target)
        if why is not None:
            raise CkptError(f"rollback_to={target}: Spark could not restart from it either: {why}")
        later_logs = [x for x in ckpt.batches.offsets + ckpt.batches.commits if x > target]
        if later_logs:
            plan.rollback_to = target
            _plan_rollback(ckpt, plan, target, add)
            repartition_only = _plan_repartition_rollback(ckpt, plan, later_logs, add)
    # Partial files and orphan sidecars.
    present = {f.path for f in ckpt.files}
    for f in ckpt.temp_files:
        add(QUARANTINE, f.path, "temp file of an interrupted write", 0)
    for f in ckpt.of_kind(*CHECKSUM_KINDS):
        if f.target and f.target not in present:
            add(QUARANTINE, f.path, f"checksum of {f.target}, which is not there", 0)
    restart_version = plan.rollback_to if plan.rollback_to is not None else latest
    for finding in report.findings:
        if finding.code == "EMPTY_FILE" and any(
            "/SSTs/" in p or "/logs/" in p for p in finding.paths
        ):
            for path in finding.paths:
                add(QUARANTINE, path, "empty RocksDB file left by an interrupted upload", 0)
            continue
        if finding.code in ("EMPTY_FILE", "TRUNCATED_FILE", "CORRUPT_FILE"):
            for path in finding.paths:
                damaged = next((x for x in ckpt.files if x.path == path), None)
                if damaged is None or damaged.version is None or restart_version is None:
                    continue
                if damaged.version > restart_version + 1:
                    add(QUARANTINE, path, f"{finding.code.lower()}: {finding.message}", 0)
        if finding.code == "CRC_MISMATCH" and len(finding.paths) == 2:
            crc, main = finding.paths
            if crc in planned or main in planned:
                continue
            others = [x for x in report.findings if x is not finding and main in x.paths]
            if others:
                plan.notes.append(
                    f"{crc}: not rewritten, because {main} itself has problems ({others[0].code})"
                )
                continue
            add(REWRITE_CRC, crc, f"does not match {main}, which reads correctly", 0, covers=main)
    if snapshot:
        _plan_snapshots(ckpt, plan, add)
    _explain_left(ckpt, plan, report.findings, planned)
    if plan.rollback_to is not None and not repartition_only:
        plan.notes.append(
            f"Rolling back makes batch {plan.rollback_to} the last committed one: Spark re-runs "
            f"the batches after it from their source offsets. This needs a replayable source "
            "(files, Kafka within retention) and may write their output again to sinks that "
            "are not idempotent."
        )
    plan.actions.sort(key=lambda a: a.order)
    return plan


def _explain_left(
    ckpt: Checkpoint, plan: RepairPlan, findings: list[Finding], planned: set[str]
) -> None:
    """Say, for every error repair does not cure, why it leaves it: the restart's own errors
    that no action here cures, and the errors of versions a restart does not load (found by
    validate's every-version scope, whose plans and lineage lines are read but whose state
    files are not decoded, as ``validate --deep`` would)."""
    latest = ckpt.batches.latest_committed
    restart = f"a restart from batch {latest}" if latest is not None else "a restart"
    plan.scope = (
        f"what {restart} loads (decoded), and the plan and lineage of every retained "
        "version (not decoded: ckpt validate --deep decodes every file)"
    )
    seen = {(f.code, tuple(f.paths)) for f in findings}
    for f in findings:
        if f.severity != ERROR or _cured(f, plan, planned):
            continue
        plan.left.append(_left(f, f"no repair here cures it: {f.hint}", restart=True))
    wider = validate(ckpt, all_versions=True, decode_limit=0)
    for f in wider.findings:
        if f.severity != ERROR or (f.code, tuple(f.paths)) in seen:
            continue
        if _cured(f, plan, planned, by_rollback=False):
            continue
        if f.code in _REFUSE_CODES:
            continue  # about the whole checkpoint, not one version: validate says it
        version = f.details.get("version") or f.details.get("lineage_version")
        which = f"version {version}" if version is not None else "an older version"
        plan.left.append(
            _left(
                f,
                f"not needed by {restart} ({which} is not one it loads); a rollback to "
                f"an earlier batch (--rollback-to), or a replay or change feed of the "
                f"versions it concerns, would fail. {f.hint}",
                restart=False,
            )
        )


def _cured(f: Finding, plan: RepairPlan, planned: set[str], *, by_rollback: bool = True) -> bool:
    """Whether the plan's actions take care of ``f``: a rollback cures the restart's errors
    it is for, and a quarantined or rewritten file what is about it."""
    if by_rollback and plan.rollback_to is not None and f.code in _ROLLBACK_CODES:
        return True
    return any(p in planned for p in f.paths)


def _left(f: Finding, why: str, *, restart: bool) -> dict[str, Any]:
    return {"code": f.code, "paths": f.paths, "message": f.message, "why": why, "restart": restart}


def _plan_rollback(ckpt: Checkpoint, plan: RepairPlan, target: int, add: Any) -> None:
    b = ckpt.batches
    later = sorted({x for x in b.offsets + b.commits if x > target}, reverse=True)
    # Newest first, each commit before its offsets entry: after every step the logs still
    # describe a consistent query (a crash mid-way leaves at most one batch in flight).
    order = 1
    for batch in later:
        for kind in ("commits", "offsets"):
            path = f"{kind}/{batch}"
            if ckpt.listing.get(path) is not None:
                add(QUARANTINE, path, f"{kind} entry after batch {target}", order)
                order += 1
    top = target + 1
    state_files = [
        f
        for f in ckpt.files
        if f.kind in (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.ZIP, FileKind.CHANGELOG)
        and f.version is not None
        and f.version > top
    ]
    for f in sorted(state_files, key=lambda f: (-(f.version or 0), natural_key(f.path))):
        add(QUARANTINE, f.path, f"state version {f.version} is after version {top}", 10_000)


def _plan_repartition_rollback(
    ckpt: Checkpoint, plan: RepairPlan, later_logs: list[int], add: Any
) -> bool:
    """An unfinished repartition rolled back: also the RocksDB files only its state named.
    True when its batch is all the rollback removes (no batch with input is re-run)."""
    attempt = find_unfinished_repartition(ckpt)
    if attempt is None or plan.rollback_to != ckpt.batches.latest_committed:
        return False
    for f in attempt_files(ckpt, attempt):
        add(
            QUARANTINE,
            f.path,
            f"written by the unfinished repartition of batch {attempt.batch}",
            10_000,
        )
    plan.notes.append(
        f"{attempt.describe()}: the rollback removes it and the files it wrote, so the query "
        f"starts again with {attempt.from_partitions} partitions (batch {attempt.batch} read "
        "no input; nothing is re-run for it)"
    )
    return set(later_logs) == {attempt.batch}


def _plan_snapshots(ckpt: Checkpoint, plan: RepairPlan, add: Any) -> None:
    latest = plan.rollback_to if plan.rollback_to is not None else ckpt.batches.latest_committed
    if latest is None:
        return
    version = latest + 1
    for op in ckpt.operators.values():
        for store in op.stores.values():
            if store.provider != "hdfs":
                plan.notes.append(
                    f"{op.path} store {store.name}: snapshot=True applies to HDFS-backed stores; "
                    "RocksDB writes its own zips"
                )
                continue
            for part in store.partitions.values():
                path = f"{part.path}/{version}.snapshot"
                if ckpt.listing.get(path) is not None:
                    continue
                add(
                    WRITE_SNAPSHOT,
                    path,
                    f"a full copy of version {version} so it no longer depends on older deltas",
                    20_000,
                    operator=op.id,
                    store=store.name,
                    partition=part.id,
                    version=version,
                )
