"""Severities and finding codes: the one list of what ``ckpt validate`` can report.

Each code is a named constant (a typo is then a NameError, not a silent new code), and
``CODES`` gives its default severity and its hint. The documentation's codes page is
generated from ``CODES`` (scripts/docs_hooks.py; tests/test_docs.py checks it).
"""

from __future__ import annotations

from ckpt_cli.core.model import FileKind
from ckpt_cli.errors import (
    FormatError,
    LimitExceededError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2}

MISSING_METADATA = "MISSING_METADATA"
CORRUPT_METADATA = "CORRUPT_METADATA"
CORRUPT_OFFSETS = "CORRUPT_OFFSETS"
CORRUPT_COMMIT = "CORRUPT_COMMIT"
COMMIT_WITHOUT_OFFSETS = "COMMIT_WITHOUT_OFFSETS"
BATCH_GAP = "BATCH_GAP"
UNCOMMITTED_BATCH = "UNCOMMITTED_BATCH"
MISSING_STATE_FILE = "MISSING_STATE_FILE"
MISSING_SST = "MISSING_SST"
SST_SIZE_MISMATCH = "SST_SIZE_MISMATCH"
LINEAGE_MISMATCH = "LINEAGE_MISMATCH"
MISSING_UNIQUE_ID_FILE = "MISSING_UNIQUE_ID_FILE"
UNKNOWN_UNIQUE_ID = "UNKNOWN_UNIQUE_ID"
PARTITION_COUNT_MISMATCH = "PARTITION_COUNT_MISMATCH"
TEMP_FILE = "TEMP_FILE"
EMPTY_FILE = "EMPTY_FILE"
TRUNCATED_FILE = "TRUNCATED_FILE"
CORRUPT_FILE = "CORRUPT_FILE"
MISSING_SOURCE_LOG = "MISSING_SOURCE_LOG"
LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
ZIP_METADATA_V2 = "ZIP_METADATA_V2"
CRC_MISMATCH = "CRC_MISMATCH"
ORPHAN_FILE = "ORPHAN_FILE"
MISSING_SCHEMA = "MISSING_SCHEMA"
CORRUPT_SCHEMA = "CORRUPT_SCHEMA"
UNKNOWN_FILE = "UNKNOWN_FILE"
SYMLINK = "SYMLINK"
FMGWS_V1_SNAPSHOT = "FMGWS_V1_SNAPSHOT"
SCHEMA_FAMILY_MISMATCH = "SCHEMA_FAMILY_MISMATCH"
ROWS_NOT_DECODED = "ROWS_NOT_DECODED"
ROW_LAYOUT_MISMATCH = "ROW_LAYOUT_MISMATCH"
UNFINISHED_REPARTITION = "UNFINISHED_REPARTITION"
UNFINISHED_CONVERSION = "UNFINISHED_CONVERSION"
SCHEMA_PATHS_ELSEWHERE = "SCHEMA_PATHS_ELSEWHERE"

_CONVERSION_UNDO = (
    "`ckpt convert CKPT --undo` rolls it back (the old provider's files come back from the "
    "quarantine), then `ckpt convert` may run again"
)
# A state error where a conversion was interrupted.
CONVERSION_HINT = (
    "a conversion (ckpt convert) was interrupted: the store holds files of another provider "
    "or checkpoint format, or its manifest beside the checkpoint is unfinished; " + _CONVERSION_UNDO
)
_ROLL_BACK = (
    "Spark fails reading this entry; ckpt repair can roll the logs back to the last good batch"
)
# The hint of every finding ``ckpt repair`` can cure by a rollback (repair/plan.py's
# _ROLLBACK_CODES; tests/test_one_verdict.py holds the two lists together).
_REPAIR = (
    "if a restart needs it, ckpt repair rolls back to the newest batch whose state loads "
    "(without --apply it shows the plan)"
)

# code -> (default severity, hint). The severity of some codes depends on where they occur.
CODES: dict[str, tuple[str, str]] = {
    MISSING_METADATA: (
        ERROR,
        "the root metadata file holds the query id; restore it from a backup, or start the "
        "query on a new checkpoint",
    ),
    CORRUPT_METADATA: (ERROR, 'restore the metadata file from a backup ({"id":"<uuid>"})'),
    CORRUPT_OFFSETS: (ERROR, _ROLL_BACK),
    CORRUPT_COMMIT: (ERROR, _ROLL_BACK),
    COMMIT_WITHOUT_OFFSETS: (
        ERROR,
        "a commit entry has no offsets entry; the logs were edited or copied partially; " + _REPAIR,
    ),
    BATCH_GAP: (WARNING, "log entries are missing inside the retained range; " + _REPAIR),
    UNCOMMITTED_BATCH: (
        INFO,
        "Spark re-runs the last planned batch on restart; nothing to do",
    ),
    MISSING_STATE_FILE: (
        ERROR,
        "the version cannot be loaded; " + _REPAIR + ", or restore the file from a backup",
    ),
    MISSING_SST: (
        ERROR,
        "Spark cannot load the version; " + _REPAIR + ", or restore the SST from a backup",
    ),
    SST_SIZE_MISMATCH: (
        ERROR,
        "Spark refuses a version whose SST size differs from its zip's metadata; "
        + _REPAIR
        + ", or restore the file",
    ),
    LINEAGE_MISMATCH: (
        ERROR,
        "the commit log's uniqueIds and the changelog lineage disagree; Spark fails with "
        "CANNOT_LOAD_STATE_STORE; " + _REPAIR,
    ),
    MISSING_UNIQUE_ID_FILE: (
        ERROR,
        "the commit log names a state file version that is not in the checkpoint; " + _REPAIR,
    ),
    UNKNOWN_UNIQUE_ID: (
        INFO,
        "the commit recording this version's uniqueId is purged (normal: Spark keeps state "
        "files back to a snapshot, and commits only minBatchesToRetain back); not checked",
    ),
    PARTITION_COUNT_MISMATCH: (
        ERROR,
        "the number of state partitions must stay equal to spark.sql.shuffle.partitions of the "
        "first run",
    ),
    TEMP_FILE: (
        WARNING,
        "left by an interrupted write; Spark ignores it, ckpt cleanup removes it",
    ),
    EMPTY_FILE: (
        ERROR,
        "a zero-byte file where Spark wrote content; " + _REPAIR + ", or restore it",
    ),
    TRUNCATED_FILE: (
        ERROR,
        "the file ends before its end marker (an interrupted copy or write); "
        + _REPAIR
        + ", or restore it",
    ),
    CORRUPT_FILE: (
        ERROR,
        "the file cannot be decoded; " + _REPAIR + ", or restore it from a backup",
    ),
    MISSING_SOURCE_LOG: (
        ERROR,
        "the file source reads this log batch on restart and fails without it; restore it from "
        "a backup",
    ),
    LIMIT_EXCEEDED: (
        ERROR,
        "the file inflates or lists more than ckpt's safety limits allow (a decompression "
        "bomb?); if it is genuine, raise the limit named in the message and run again",
    ),
    # Not corruption: a version header ckpt does not know, in a log entry, a source log or a
    # state file. An error all the same, because ckpt could not check what Spark needs.
    UNSUPPORTED_VERSION: (ERROR, unsupported_hint()),
    # Info where no restart loads such a zip (the finding's hint says what the zips still do).
    ZIP_METADATA_V2: (
        WARNING,
        "Spark 4.1 and later read only v1 RocksDB zip metadata: the finding says whether a "
        "restart on 4.1, and on 4.2+ (whose auto snapshot repair can rebuild from changelogs "
        "1 to the restart version), would load a Spark 4.0 v2 zip; Spark 4.0 restarts it; "
        "ckpt convert CKPT --format-version 2 rewrites the zips with v1 metadata",
    ),
    CRC_MISMATCH: (
        ERROR,
        "the file or its checksum changed after Spark wrote it (Hadoop's FileSystem and RocksDB's "
        "file manager refuse such a file); if the file itself is right, ckpt repair rewrites the "
        "checksum",
    ),
    ORPHAN_FILE: (
        INFO,
        "no retained version needs it; `ckpt orphans` lists such files (and why any is kept), "
        "`ckpt cleanup` removes them",
    ),
    MISSING_SCHEMA: (
        WARNING,
        "Spark rewrites a missing schema file, but state cannot be decoded without it",
    ),
    CORRUPT_SCHEMA: (ERROR, "Spark fails reading the state schema; restore it from a backup"),
    UNKNOWN_FILE: (INFO, "not a file Spark writes in a checkpoint"),
    SYMLINK: (
        WARNING,
        "ckpt does not follow symbolic links to directories, and cleanup/repair never change "
        "anything through a link; replace the link with what it points to for a full check",
    ),
    FMGWS_V1_SNAPSHOT: (
        ERROR,
        "Spark 4.3 cannot load flatMapGroupsWithState state format 1 snapshots; start the query "
        "on a new checkpoint (state format 2, the default, does not have this problem); the "
        "state can still be read from its change feed",
    ),
    SCHEMA_FAMILY_MISMATCH: (
        WARNING,
        "the store's zips and its schema file v3 (_stateSchema/) disagree on the column "
        "families; the state of a family without a schema cannot be decoded: restore the "
        "schema file or the zip from a backup",
    ),
    ROW_LAYOUT_MISMATCH: (
        WARNING,
        "rows written under another schema than the one they are read with (a restart with "
        "spark.sql.streaming.stateStore.stateSchemaCheck=false over an incompatible change): "
        "Spark reads their fields from the wrong bytes; run the query code that wrote them, "
        "or start the query on a new checkpoint",
    ),
    ROWS_NOT_DECODED: (
        INFO,
        "not a problem of the checkpoint: ckpt does not decode this store's rows yet, so "
        "--deep checked its files but not its keys and values",
    ),
    SCHEMA_PATHS_ELSEWHERE: (
        WARNING,
        "a copied or moved transformWithState checkpoint: Spark reads the schema files from "
        "the home its operator metadata names, and fails to restart once they are gone there; "
        "`ckpt relocate CKPT NEW_HOME --apply` writes a copy that names its own",
    ),
    UNFINISHED_REPARTITION: (
        ERROR,
        "Spark refuses to start the query (STREAMING_UNFINISHED_REPARTITION_DETECTED); "
        "`ckpt repartition CKPT --partitions M` (M: the new count) finishes the repartition, "
        "`ckpt repair` rolls it back to the last committed batch",
    ),
    UNFINISHED_CONVERSION: (ERROR, _CONVERSION_UNDO),
}

# Findings of a file missing from the listing: under a linked directory (which the listing does
# not enter) or at a dangling link, they are counted by that link's SYMLINK finding instead.
MISSING_CODES = frozenset(
    {
        MISSING_SST,
        MISSING_STATE_FILE,
        MISSING_UNIQUE_ID_FILE,
        MISSING_SOURCE_LOG,
        MISSING_METADATA,
        BATCH_GAP,
    }
)


def format_error_code(exc: FormatError, kind: FileKind | None = None) -> str:
    """The finding code for a file that could not be read: damage only where ckpt knows it is
    damage (a version it does not read, or a file beyond its limits, is not)."""
    if isinstance(exc, TruncatedFileError):
        return TRUNCATED_FILE
    if isinstance(exc, LimitExceededError):
        return LIMIT_EXCEEDED
    if isinstance(exc, UnsupportedVersionError):
        return UNSUPPORTED_VERSION
    return CORRUPT_SCHEMA if kind is FileKind.STATE_SCHEMA else CORRUPT_FILE
