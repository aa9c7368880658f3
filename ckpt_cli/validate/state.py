"""State stores: partitions, the versions a restart (or every retained one) loads, the
operator metadata and the state schema files."""

from __future__ import annotations

from collections.abc import Iterable, Set

from ckpt_cli.core.model import DEFAULT_STORE, FileKind, Operator, Partition, Store
from ckpt_cli.core.rebuild import StateUnavailable, plan_version
from ckpt_cli.core.unfinished import (
    find_unfinished_conversion,
    find_unfinished_repartition,
    left_over_partitions,
)
from ckpt_cli.errors import FormatError, UnsupportedVersionError
from ckpt_cli.formats import logs
from ckpt_cli.validate.codes import (
    CODES,
    CONVERSION_HINT,
    CORRUPT_FILE,
    EMPTY_FILE,
    ERROR,
    INFO,
    MISSING_SCHEMA,
    MISSING_STATE_FILE,
    PARTITION_COUNT_MISMATCH,
    UNSUPPORTED_VERSION,
    WARNING,
)
from ckpt_cli.validate.context import ValidationRun
from ckpt_cli.validate.lineage import check_plan_lineage, check_retained_changelogs
from ckpt_cli.validate.spark4 import check_fmgws_v1


def _shuffle_partitions(run: ValidationRun) -> int | None:
    try:
        latest = run.ckpt.latest_offsets
    except FormatError:
        return None
    return latest.shuffle_partitions if latest else None


def check_state(run: ValidationRun) -> None:
    ops = run.ckpt.operators
    # An unfinished repartition: a restart from the last commit loads the old layout; the
    # partitions only the attempt wrote are its (UNFINISHED_REPARTITION names them).
    attempt = find_unfinished_repartition(run.ckpt)
    want = attempt.from_partitions if attempt else _shuffle_partitions(run)
    if want is None:
        want = max(
            (len(s.partitions) for op in ops.values() for s in op.stores.values()), default=0
        )
    attempt_only = range(want, attempt.to_partitions) if attempt else range(0)
    target = run.target_version()
    # Partitions a repartition to fewer partitions left behind: not state Spark loads.
    left_over = left_over_partitions(run.ckpt)
    # An unfinished conversion: a restart fails (its UNFINISHED_CONVERSION says so); the
    # stores' versions, part old provider and part new, are not planned.
    converting = find_unfinished_conversion(run.ckpt) is not None
    for op in ops.values():
        _check_operator_metadata(run, op.id)
        _check_schema(run, op.id)
        check_fmgws_v1(run, op)
        for store in op.stores.values():
            ours = {p.path for p in store.partitions.values() if p.id in attempt_only}
            missing = _check_partition_count(run, op, store, want, left_over, attempt_only)
            if not converting:
                _check_versions(run, op.id, store, target, left_over.keys() | ours)
            if target:
                for pid in missing:
                    path = f"{op.path}/{pid}" + (
                        f"/{store.name}" if store.name != DEFAULT_STORE else ""
                    )
                    run.add(
                        MISSING_STATE_FILE,
                        f"{path}: no state files at all; version {target} cannot be loaded",
                        [path],
                        operator=op.id,
                        store=store.name,
                        partition=pid,
                        version=target,
                    )


def _check_partition_count(
    run: ValidationRun,
    op: Operator,
    store: Store,
    want: int,
    left_over: dict[str, int],
    attempt_only: range,
) -> list[int]:
    """PARTITION_COUNT_MISMATCH when partitions are missing or extra; returns the missing.
    Partitions left over by a repartition are info; those only an unfinished one wrote are
    its UNFINISHED_REPARTITION finding's."""
    ids = sorted(p for p in store.partitions if p not in attempt_only)
    missing = [p for p in range(want) if p not in store.partitions]
    left = [p for p in ids if store.partitions[p].path in left_over]
    extra = [p for p in ids if p >= want and p not in left]
    if left:
        run.add(
            PARTITION_COUNT_MISMATCH,
            f"{op.path} store {store.name}: partitions {', '.join(map(str, left))} are left "
            f"over from before a repartition to {want} partitions; ckpt cleanup removes them",
            [store.partitions[p].path for p in left],
            severity=INFO,
            operator=op.id,
            store=store.name,
        )
    # A partition directory that is a symbolic link is not listed: its SYMLINK finding says
    # so, rather than a wrong count.
    unlinked = [p for p in missing if run.link_of(f"{op.path}/{p}") is None]
    if unlinked or extra:
        run.add(
            PARTITION_COUNT_MISMATCH,
            f"{op.path} store {store.name}: {len(ids)} partitions, expected {want}"
            + (f"; missing {', '.join(map(str, unlinked))}" if unlinked else "")
            + (f"; unexpected {', '.join(map(str, extra))}" if extra else ""),
            [op.path],
            operator=op.id,
            store=store.name,
        )
    return missing


def _check_versions(
    run: ValidationRun, op: int, store: Store, target: int | None, not_loaded: Set[str]
) -> None:
    """Plan the versions in scope of every partition of ``store``, as Spark loads them
    (``not_loaded``: partition paths a restart does not load)."""
    parts = [p for p in store.partitions.values() if p.path not in not_loaded]
    if target and not run.all_versions:
        _prefetch_lineage(run, parts, {target})
    if run.every:
        _prefetch_lineage(run, parts, None)
    for part in parts:
        if run.every:
            check_retained_changelogs(run, op, store.name, part)
        versions: list[int] = []
        if run.all_versions:
            versions = [v for v in part.version_ids if target is None or v <= target]
            _prefetch_lineage(run, [part], set(versions))
        elif target:
            versions = [target]
        for v in versions:
            _check_version(run, op, store.name, part.id, v)


def _prefetch_lineage(
    run: ValidationRun, parts: Iterable[Partition], versions: set[int] | None
) -> None:
    """Checkpoint format v2 plans read each version's changelog lineage line: on object
    stores, fetch those heads together rather than one after another (None: every
    version's)."""
    # Only the versions' own files when named: a restart's one version is a few of the
    # 100s of files of each partition.
    files = (
        (f for part in parts for f in part.files)
        if versions is None
        else (
            f
            for part in parts
            for v in versions
            if (sv := part.versions.get(v)) is not None
            for f in sv.files
        )
    )
    run.ckpt.storage.prefetch(
        [f.path for f in files if f.kind is FileKind.CHANGELOG and f.unique_id is not None],
        heads=True,
    )


def _check_version(run: ValidationRun, op: int, store: str, part: int, version: int) -> None:
    run.versions_checked += 1
    try:
        plan = plan_version(run.ckpt, op, part, version, store=store)
    except StateUnavailable as exc:
        code = exc.reason if exc.reason in CODES else MISSING_STATE_FILE
        where = run.ckpt.operators[op].path + ("" if store == DEFAULT_STORE else f" store {store}")
        converting = (
            run.ckpt.operators[op].stores[store].other_provider_files
            or where in run.other_format_stores
            or run.conversion_interrupted
        )
        run.add(
            code,
            exc.message,
            exc.paths,
            hint=CONVERSION_HINT if converting else None,
            operator=op,
            store=store,
            partition=part,
            version=version,
        )
        return
    except UnsupportedVersionError as exc:  # a changelog header of an unknown version
        run.add(UNSUPPORTED_VERSION, str(exc), [exc.path], version=version)
        return
    except FormatError as exc:  # a changelog whose header cannot be read
        run.add(CORRUPT_FILE, str(exc), [exc.path], version=version)
        return
    if plan.unique_id is not None:
        check_plan_lineage(run, plan)
    if version == run.target_version():
        run.restart_plans.append(plan)
    for f in plan.files:
        run.queue(f)


def _check_operator_metadata(run: ValidationRun, op: int) -> None:
    """``state/<op>/_metadata/metadata`` (v1) and ``_metadata/v2/<batch>`` (v2,
    transformWithState), as Spark 4.3 reads them on the first batch of a restart
    (IncrementalExecution's StateSchemaAndOperatorMetadataRule). It catches an error
    reading the v1 file and only logs "Error reading metadata path for stateful
    operator", so an unreadable v1 file does not stop a restart; transformWithState reads
    the newest v2 file for its state schema paths (SchemaValidationUtils.
    validateAndWriteStateSchema, uncaught) and fails on an unreadable one, and ignores the
    older ones (all checked with real restarts)."""
    files = run.ckpt.operators[op].metadata_files
    v2 = run.ckpt.operators[op].metadata_v2_files
    newest_v2 = v2[max(v2)] if v2 else None
    for f in files:
        if f.path == f"state/{op}/_metadata/metadata":
            severity, effect = (
                WARNING,
                "Spark logs a warning and restarts without it (it does not rewrite it, "
                "and cannot check the new plan's operators against it)",
            )
        elif f is newest_v2:
            severity, effect = (
                ERROR,
                "transformWithState reads its state schema paths from the newest one on "
                "restart, and fails",
            )
        elif f in v2.values():
            severity, effect = WARNING, "Spark reads only the newest one on restart"
        else:
            continue  # not a file Spark reads here
        if f.entry.size == 0:
            run.add(
                EMPTY_FILE,
                f"{f.path}: empty operator metadata file; {effect}",
                [f.path],
                severity=severity,
                operator=op,
            )
            continue
        try:
            logs.parse_operator_metadata(f.path, run.ckpt.storage.read_bytes(f.path))
        except FormatError as exc:
            run.add(
                CORRUPT_FILE,
                f"{exc}; {effect}",
                [f.path],
                severity=severity,
                operator=op,
            )


def _check_schema(run: ValidationRun, op: int) -> None:
    operator = run.ckpt.operators[op]
    for store in operator.stores.values():
        files = list(store.schema_files) or [
            f for f in operator.schema_files if f"/_stateSchema/{store.name}/" in f"/{f.path}/"
        ]
        wheres = (
            f"{operator.path}/0/_metadata/schema",
            f"{operator.path}/0/{store.name}/_metadata/schema",
            f"{operator.path}/_stateSchema/{store.name}/",
        )
        linked = [(link, w) for w in wheres if (link := run.link_of(w)) is not None]
        if not files and linked:
            link, where = linked[0]
            run.behind_links.setdefault(link, set()).add(where.rstrip("/"))
        elif not files:
            run.add(
                MISSING_SCHEMA,
                f"{operator.path}: store {store.name} has no schema file",
                [operator.path],
                operator=op,
                store=store.name,
            )
        for f in files:
            run.queue(f)
