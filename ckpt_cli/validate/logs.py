"""The root ``metadata`` file and the offsets and commit logs."""

from __future__ import annotations

from ckpt_cli.errors import FormatError, UnsupportedVersionError
from ckpt_cli.validate.codes import (
    BATCH_GAP,
    COMMIT_WITHOUT_OFFSETS,
    CORRUPT_COMMIT,
    CORRUPT_METADATA,
    CORRUPT_OFFSETS,
    EMPTY_FILE,
    ERROR,
    INFO,
    MISSING_METADATA,
    UNCOMMITTED_BATCH,
    UNSUPPORTED_VERSION,
    WARNING,
)
from ckpt_cli.validate.context import ValidationRun


def check_metadata(run: ValidationRun) -> None:
    ckpt = run.ckpt
    if ckpt.metadata_file is None:
        run.add(MISSING_METADATA, "metadata: missing (the query id file)", ["metadata"])
        return
    try:
        _ = ckpt.query_id
    except FormatError as exc:
        run.add(CORRUPT_METADATA, str(exc), ["metadata"])
        return
    if ckpt.sidecars_of("metadata"):
        run.queue(ckpt.metadata_file)


def check_logs(run: ValidationRun) -> None:
    """The offsets entries a restart reads (the latest and the one before it), the latest
    commit (every entry in the wider scopes), and the shape of both logs: holes, commits
    without offsets, batches in flight."""
    b = run.ckpt.batches
    offsets, commits = b.offsets, b.commits
    wanted_offsets: list[int] = []
    if offsets:
        latest = offsets[-1]
        wanted = {latest, latest - 1} if not run.every else set(offsets)
        if run.batch is not None:
            wanted |= {run.batch, run.batch - 1}
        wanted_offsets = sorted(wanted & set(offsets))
    wanted_commits = ([commits[-1]] if not run.every else list(commits)) if commits else []
    # Many small log files: on object stores, fetched together rather than one by one.
    run.ckpt.storage.prefetch(
        [f"offsets/{x}" for x in wanted_offsets] + [f"commits/{x}" for x in wanted_commits]
    )
    for batch in wanted_offsets:
        run.needed_logs.add(f"offsets/{batch}")
        _read_log(run, "offsets", batch)
    for batch in wanted_commits:
        run.needed_logs.add(f"commits/{batch}")
        _read_log(run, "commits", batch)
    # Commits whose batch was never planned (within the offsets' retained range).
    if offsets:
        stray = [c for c in commits if c >= offsets[0] and c not in set(offsets)]
        for c in stray:
            run.add(
                COMMIT_WITHOUT_OFFSETS,
                f"commits/{c}: batch {c} has a commit but no offsets entry",
                [f"commits/{c}"],
                batch=c,
            )
    # Holes: an offsets hole just below the latest batch breaks a restart.
    if offsets:
        for gap in b.offsets_gaps:
            restart_needs = gap >= offsets[-1] - 1
            run.add(
                BATCH_GAP,
                f"offsets/{gap}: missing between offsets/{offsets[0]} and offsets/{offsets[-1]}",
                [f"offsets/{gap}"],
                severity=ERROR if restart_needs else WARNING,
                batch=gap,
            )
    for gap in b.commits_gaps:
        run.add(
            BATCH_GAP,
            f"commits/{gap}: missing between commits/{commits[0]} and commits/{commits[-1]}",
            [f"commits/{gap}"],
            batch=gap,
        )
    in_flight = b.in_flight
    if in_flight:
        many = len(in_flight) > 1
        run.add(
            UNCOMMITTED_BATCH,
            (
                f"batches {', '.join(map(str, in_flight))} have offsets but no commit; "
                "Spark only re-runs the last one"
                if many
                else f"batch {in_flight[0]} is planned (offsets/{in_flight[0]}) but not "
                "committed; Spark re-runs it on restart"
            ),
            [f"offsets/{x}" for x in in_flight],
            severity=ERROR if many else INFO,
            batches=list(in_flight),
        )


def _read_log(run: ValidationRun, kind: str, batch: int) -> None:
    path = f"{kind}/{batch}"
    entry = run.ckpt.listing.get(path)
    if entry is not None and entry.size == 0:
        run.add(EMPTY_FILE, f"{path}: empty file (Spark cannot parse it)", [path])
        return
    try:
        if kind == "offsets":
            run.ckpt.offsets(batch)
        else:
            run.ckpt.commit(batch)
    except UnsupportedVersionError as exc:
        run.add(UNSUPPORTED_VERSION, str(exc), [path])
        return
    except FormatError as exc:
        run.add(CORRUPT_OFFSETS if kind == "offsets" else CORRUPT_COMMIT, str(exc), [path])
        return
    # Hadoop refuses a log entry whose .crc does not match (a hand-edited file).
    f = run.ckpt.file(path)
    if f is not None and run.ckpt.sidecars_of(path):
        run.queue(f)
