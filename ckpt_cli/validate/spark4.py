"""Checks of state that only Spark 4.x's own reads reject (the pending Spark 4.3 cases)."""

from __future__ import annotations

import itertools
import json

from ckpt_cli.core.model import DEFAULT_STORE, Checkpoint, Operator
from ckpt_cli.errors import CkptError, FormatError, UnsupportedVersionError
from ckpt_cli.formats.state_schema import parse_state_schema
from ckpt_cli.formats.tws import (
    OperatorMetadataV2,
    family_role,
    same_location,
    schema_homes,
)
from ckpt_cli.validate.codes import (
    ERROR,
    FMGWS_V1_SNAPSHOT,
    ROW_LAYOUT_MISMATCH,
    ROWS_NOT_DECODED,
    SCHEMA_FAMILY_MISMATCH,
    SCHEMA_PATHS_ELSEWHERE,
)
from ckpt_cli.validate.context import ValidationRun

FMGWS_FORMAT = "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"
ENCODING_FORMAT = "spark.sql.streaming.stateStore.encodingFormat"
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


def check_schema_homes(run: ValidationRun) -> None:
    """transformWithState: the newest operator metadata v2 of each operator names its schema
    files by absolute URL; a checkpoint copied or moved elsewhere still names its old home,
    where Spark 4.3 reads them at restart (ckpt itself reads this checkpoint's own
    ``_stateSchema/``)."""
    from ckpt_cli.core.history import operator_history

    ckpt = run.ckpt
    here = ckpt.storage.spark_location
    for op in ckpt.operators.values():
        try:
            eras = operator_history(ckpt, op.id).eras  # parsed once per checkpoint
        except CkptError:
            continue  # unreadable: the metadata checks report it
        if not eras:
            continue
        newest, meta = eras[-1], eras[-1].metadata
        if "transformWithState" not in meta.operator_name:
            # A join in state format 3+ writes metadata v2 too, but a copy of it restarts
            # without its schema paths (checked: tests/test_relocate_spark.py).
            continue
        elsewhere = sorted(h for h in schema_homes(meta) if not same_location(h, here))
        if not elsewhere:
            continue
        gone = _missing_schema_file(ckpt, meta)
        run.add(
            SCHEMA_PATHS_ELSEWHERE,
            f"{newest.path}: names its schema files under {', '.join(elsewhere)}, not under "
            f"this checkpoint ({here})"
            + (f"; {gone} does not exist: Spark fails to restart" if gone else ""),
            [newest.path],
            severity=ERROR if gone else None,
            operator=op.id,
        )


def _missing_schema_file(ckpt: Checkpoint, meta: OperatorMetadataV2) -> str | None:
    """The first schema file ``meta`` names that is not there, when that can be told: on
    local disk, or on this checkpoint's own kind of object store (``s3a://`` is S3's)."""
    storage = ckpt.storage
    own = "file" if storage.is_local else storage.url.partition(":")[0]
    for store in meta.stores:
        for url in store.schema_file_paths:
            scheme, _, rest = url.partition(":")
            scheme = _SAME_SCHEME.get(scheme, scheme)
            if scheme != own:
                continue  # another kind of store: not looked at
            location = rest if scheme == "file" else f"{scheme}:{rest}"
            if not storage.exists_absolute(location):
                return url
    return None


# Schemes Hadoop connectors use for the stores fsspec knows by another name.
_SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "abfs", "gcs": "gs"}


def check_column_families(run: ValidationRun) -> None:
    """The virtual column families in the checked zips (``columnFamilyMapping``) against the
    schema file v3 in force at each zip's batch: the last ``stateSchemaFilePaths`` entry of
    the operator metadata Spark reads that batch with (the newest ``_metadata/v2/<b>`` at or
    below it; a query's families change when a restart adds or drops a state variable),
    read from this checkpoint's own ``_stateSchema/`` (metadata v2 names the absolute path
    where Spark ran, elsewhere once a checkpoint is moved). A zip may keep a family of a
    variable an earlier run had: ``deleteIfExists`` drops the variable's own family but
    leaves its TTL index (``$ttl_<name>``), so a family of any schema file the metadata names
    (it names every one so far) is explained."""
    schemas: dict[tuple[int, str, int], tuple[str, set[str], set[str]] | None] = {}
    for path, meta in sorted(run.zip_metadata.items()):
        if not meta.uses_column_families:
            continue
        parts = path.split("/")
        op, store = int(parts[1]), parts[3] if len(parts) > 4 else DEFAULT_STORE
        version = _zip_version(parts[-1])
        if version is None:
            continue
        era = _era_batch(run, op, version - 1)  # a zip of version v holds batch v-1's state
        if era is None:
            continue  # no readable operator metadata: its own checks report it
        if (op, store, era) not in schemas:
            schemas[op, store, era] = _schema_families(run, op, store, era)
        schema = schemas[op, store, era]
        if schema is None:
            continue  # no readable schema file: the schema checks report it
        schema_path, in_schema, named = schema
        in_zip = set(meta.column_family_mapping) - {DEFAULT_STORE}
        # Spark declares a TTL list's row counter even when the store never creates it.
        not_created = {n for n in in_schema - in_zip if family_role(n).role != "row_counter"}
        for names, where, other in (
            (in_zip - in_schema - named, path, schema_path),
            (not_created, schema_path, path),
        ):
            if names:
                run.add(
                    SCHEMA_FAMILY_MISMATCH,
                    f"{where}: column families {', '.join(sorted(names))} are not in {other} "
                    f"(the schema of batch {version - 1}, by state/{op}/_metadata/v2/{era})",
                    [path, schema_path],
                    operator=op,
                    store=store,
                )


def _zip_version(name: str) -> int | None:
    head = name.split(".", 1)[0].split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _era_batch(run: ValidationRun, op: int, batch: int) -> int | None:
    """The ``_metadata/v2/<b>`` file batch ``batch`` is read with (None: unreadable)."""
    from ckpt_cli.core.history import operator_history

    try:
        era = operator_history(run.ckpt, op).era_at(batch)
    except CkptError:
        return None  # the operator metadata checks report it
    return era.batch if era is not None else None


def _schema_families(
    run: ValidationRun, op: int, store: str, era_batch: int
) -> tuple[str, set[str], set[str]] | None:
    """The schema file in force (the last the metadata names), its families, and the
    families of the files named before it."""
    from ckpt_cli.core.history import operator_history

    history = operator_history(run.ckpt, op)
    era = next(e for e in history.eras if e.batch == era_batch)
    paths = era.schema_paths.get(store)
    if not paths or run.ckpt.file(paths[-1]) is None:
        return None
    families: list[set[str]] = []
    for path in paths:
        try:
            schema = parse_state_schema(path, run.ckpt.storage.read_bytes(path))
        except (FormatError, CkptError):
            if path == paths[-1]:
                return None  # the schema checks report it
            continue
        families.append({cf.name for cf in schema.column_families})
    return paths[-1], families[-1], set().union(*families[:-1])


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
    from ckpt_cli.core.rebuild import StateUnavailable

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
    from ckpt_cli.state.reader import covering_reads, read_state

    for part in partitions:
        try:
            # A transformWithState variable or join family at a time, as Spark reads them.
            for options in covering_reads(run.ckpt, op, run.batch):
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


# Keys a ROW_LAYOUT_MISMATCH finding names.
KEYS_NAMED = 3


def check_row_layouts(run: ValidationRun) -> None:
    """``--deep``: the sampled rows of each transformWithState variable stored as UnsafeRows
    against the value schema they are read with at the checked batch. A row of another
    layout was written under another schema (``stateSchemaCheck=false`` lets a query change
    a variable's schema incompatibly): Spark reads it without complaint, as garbage."""
    if not run.deep or run.ckpt.conf.get(ENCODING_FORMAT, "unsaferow").lower() == "avro":
        return
    from ckpt_cli.state.reader import covering_reads
    from ckpt_cli.state.tws import state_variables

    version = run.target_version()
    if version is None:
        return
    for op in run.ckpt.operators.values():
        try:
            if state_variables(run.ckpt, op.id, version - 1) is None:
                continue
            reads = [r for r in covering_reads(run.ckpt, op.id, version - 1) if "state_var" in r]
        except CkptError:
            continue  # the operator metadata checks report it
        for store in op.stores.values():
            for options in reads:
                _check_layouts(run, op, store.name, options["state_var"], version - 1)


def _check_layouts(run: ValidationRun, op: Operator, store: str, var: str, batch: int) -> None:
    from ckpt_cli.state.families import family_layout_problems
    from ckpt_cli.state.reader import read_state

    bad: list[tuple[int, object, str]] = []
    checked = 0
    for part in sorted(op.stores[store].partitions):
        try:
            rows = read_state(
                run.ckpt,
                batch=batch,
                operator=op.id,
                store=store,
                state_var=var,
                partitions=[part],
            )
            reader = rows.state_var
            if reader is None or reader.value_schema is None:
                return
            for plan in rows.plans:
                for key, problem in family_layout_problems(run.ckpt, plan, reader, ROWS_SAMPLED):
                    checked += 1
                    if problem is not None:
                        bad.append((part, key, problem))
        except CkptError:
            continue  # ROWS_NOT_DECODED says why
    if not bad:
        return
    assert reader is not None and reader.value_schema is not None
    part, key, problem = bad[0]
    keys = ", ".join(json.dumps(k, sort_keys=True) for _p, k, _q in bad[:KEYS_NAMED])
    more = f" and {len(bad) - KEYS_NAMED} more" if len(bad) > KEYS_NAMED else ""
    run.add(
        ROW_LAYOUT_MISMATCH,
        f"{op.path}/{part}: {len(bad)} of {checked} rows of state variable {var} at batch "
        f"{batch} do not fit the value schema they are read with "
        f"({reader.value_schema.simple_string()}): keys {keys}{more}; the first: {problem}",
        sorted({f"{op.path}/{p}" for p, _k, _q in bad}),
        operator=op.id,
        store=store,
    )
