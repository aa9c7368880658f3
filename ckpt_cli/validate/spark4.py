"""Checks of state that only Spark 4.x's own reads reject (the pending Spark 4.3 cases)."""

from __future__ import annotations

import itertools

from ckpt_cli.errors import CkptError, FormatError, UnsupportedVersionError
from ckpt_cli.formats.schema import parse_state_schema
from ckpt_cli.formats.tws import (
    family_role,
    parse_operator_metadata_v2,
    schema_file_in_operator_dir,
)
from ckpt_cli.model import DEFAULT_STORE, Operator
from ckpt_cli.validate.codes import FMGWS_V1_SNAPSHOT, ROWS_NOT_DECODED, SCHEMA_FAMILY_MISMATCH
from ckpt_cli.validate.context import ValidationRun

FMGWS_FORMAT = "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"
# operatorName in the operator metadata of (flat)MapGroupsWithState and its PySpark twin.
FMGWS_NAMES = frozenset({"flatMapGroupsWithState", "applyInPandasWithState"})
# Rows of each partition that --deep decodes to tell whether ckpt reads its rows.
ROWS_SAMPLED = 100


def check_fmgws_v1(run: ValidationRun, op: Operator) -> None:
    """State format 1 declares ``timeoutTimestamp`` an integer but stores a long: Spark 4.3's
    HDFS provider rejects such a snapshot on load and falls back to deltas already deleted
    (CANNOT_READ_DELTA_FILE_NOT_EXISTS), so the query cannot restart from it."""
    if run.ckpt.conf.get(FMGWS_FORMAT) != "1":
        return
    try:
        meta = run.ckpt.operator_metadata(op.id)
    except FormatError:
        return  # reported by the operator metadata check
    if meta is None or meta.operator_name not in FMGWS_NAMES:
        return
    for store in op.stores.values():
        if store.provider != "hdfs":
            continue
        snapshots = [
            f.path
            for part in store.partitions.values()
            for f in part.files
            if f.path.endswith(".snapshot")
        ]
        if snapshots:
            run.add(
                FMGWS_V1_SNAPSHOT,
                f"{snapshots[0]}: {meta.operator_name} state format 1 snapshot "
                f"({len(snapshots)} in store {store.name}); Spark 4.3 rejects it on load "
                "(timeoutTimestamp declared an integer, stored a long), so the query cannot "
                "restart from this checkpoint",
                snapshots,
                operator=op.id,
                store=store.name,
            )


def check_column_families(run: ValidationRun) -> None:
    """The virtual column families in the checked zips (``columnFamilyMapping``) against the
    store's schema file v3, read from this checkpoint's own ``_stateSchema/`` (metadata v2
    names the absolute path where Spark ran, elsewhere once a checkpoint is moved)."""
    schemas: dict[tuple[int, str], tuple[str, set[str]] | None] = {}
    for path, meta in sorted(run.zip_metadata.items()):
        if not meta.uses_column_families:
            continue
        parts = path.split("/")
        op, store = int(parts[1]), parts[3] if len(parts) > 4 else DEFAULT_STORE
        if (op, store) not in schemas:
            schemas[op, store] = _schema_families(run, run.ckpt.operators[op], store)
        schema = schemas[op, store]
        if schema is None:
            continue  # no readable schema file: the schema checks report it
        schema_path, in_schema = schema
        in_zip = set(meta.column_family_mapping) - {DEFAULT_STORE}
        # Spark declares a TTL list's row counter even when the store never creates it.
        not_created = {n for n in in_schema - in_zip if family_role(n).role != "row_counter"}
        for names, where, other in (
            (in_zip - in_schema, path, schema_path),
            (not_created, schema_path, path),
        ):
            if names:
                run.add(
                    SCHEMA_FAMILY_MISMATCH,
                    f"{where}: column families {', '.join(sorted(names))} are not in {other}",
                    [path, schema_path],
                    operator=op,
                    store=store,
                )


def _schema_families(run: ValidationRun, op: Operator, store: str) -> tuple[str, set[str]] | None:
    v2 = op.metadata_v2_files
    if not v2:
        return None
    newest = v2[max(v2)]
    try:
        meta = parse_operator_metadata_v2(newest.path, run.ckpt.storage.read_bytes(newest.path))
        urls = next(s.schema_file_paths for s in meta.stores if s.name == store)
        path = f"{op.path}/{schema_file_in_operator_dir(urls[-1], path=newest.path)}"
        if run.ckpt.file(path) is None:
            return None
        schema = parse_state_schema(path, run.ckpt.storage.read_bytes(path))
    except (FormatError, StopIteration, IndexError):
        return None  # the operator metadata and schema checks report these
    return path, {cf.name for cf in schema.column_families}


def check_rows_decodable(run: ValidationRun) -> None:
    """``--deep`` decodes the files' framing (records, zips, SSTs), not their rows: say so for
    each store whose first rows ckpt cannot decode yet, instead of a silent OK."""
    if not run.deep:
        return
    for op in run.ckpt.operators.values():
        for store in op.stores.values():
            failed = _first_undecodable(run, op.id, store.name, sorted(store.partitions))
            if failed is not None:
                part, exc = failed
                where = f"{op.path}/{part}" + (
                    f"/{store.name}" if store.name != DEFAULT_STORE else ""
                )
                if _damage(exc):
                    # The checkpoint's fault, not ckpt's: name the file.
                    paths = [p for p in _damage_paths(exc) if p] or [where]
                    run.add(
                        ROWS_NOT_DECODED,
                        f"{where}: --deep could not read the rows of store {store.name}: {exc}",
                        paths,
                        operator=op.id,
                        store=store.name,
                        hint="a file the rows need is missing or damaged (its own finding says "
                        "what to do; ckpt repair plans what it can); not a gap in ckpt",
                    )
                    continue
                run.add(
                    ROWS_NOT_DECODED,
                    f"{where}: --deep checked the files of store {store.name}, not its rows: "
                    f"ckpt cannot decode them yet ({exc})",
                    [where],
                    operator=op.id,
                    store=store.name,
                )


def _damage(exc: CkptError) -> bool:
    """Whether reading failed on a missing or damaged file (not on what ckpt decodes)."""
    from ckpt_cli.replay.plan import StateUnavailable

    if isinstance(exc, StateUnavailable):
        return True
    return isinstance(exc, FormatError) and not isinstance(exc, UnsupportedVersionError)


def _damage_paths(exc: CkptError) -> list[str]:
    paths = getattr(exc, "paths", None)
    if paths:
        return list(paths)
    return [getattr(exc, "path", "")]


def _first_undecodable(
    run: ValidationRun, op: int, store: str, partitions: list[int]
) -> tuple[int, CkptError] | None:
    """The first partition whose first rows ckpt cannot decode, and why."""
    # Only --deep decodes rows: the restart check (headline) does not import the readers.
    from ckpt_cli.replay.source import covering_reads, read_state

    for part in partitions:
        try:
            # A transformWithState variable or join family at a time, as Spark reads them.
            for options in covering_reads(run.ckpt, op):
                rows = read_state(
                    run.ckpt,
                    batch=run.batch,
                    operator=op,
                    partitions=[part],
                    **{"store": store, **options},
                )
                for _ in itertools.islice(rows, ROWS_SAMPLED):
                    pass
        except CkptError as exc:
            return part, exc
    return None
