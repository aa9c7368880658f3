"""``ckpt validate``: will this query restart, and if not, why?

The rules work from the one listing and read only what they need:

* the root ``metadata``; the latest offsets entry and the one before it (Spark reads both to
  restart a batch), the latest commit; every log entry with ``--all-versions``/``--deep``;
* per store partition, the state version a restart loads (the latest committed batch + 1, or
  ``--batch N`` + 1, or every retained version), planned the way Spark loads it
  (``state.plan_version``), and every file of those plans decoded end to end, with the
  checksum sidecars that cover them; ``--deep`` decodes every state file in the checkpoint;
* with ``--all-versions``/``--deep``, the lineage line of every retained format-v2 changelog
  (against the commit log's uniqueIds and the files present: a rollback, a replay or the
  change feed follows it as Spark does, even where a zip of its version hides it from a
  restart);
* in every scope, the files no version needs, as info (decided by ``retention``, as
  ``ckpt orphans`` decides): files of attempts the commit log did not choose, SSTs/logs no
  zip names. The restart scope reads the commits of versions with several attempts only, and
  the older zips of partitions with few of them (``RESTART_SCOPE_ZIP_READS``);
* where a restart loads a zip of Spark 4.0's ``v2`` metadata, which Spark 4.1 and later
  cannot read: whether 4.1, and 4.2+ with its auto snapshot repair, would restart the query
  (``upgrade``: the older zips and changelog lineage lines that repair would read).

Findings carry a stable code, a severity, the paths, a message and a hint. The reading of
files runs in a pool: threads for I/O, processes for ``--deep`` decoding of many files.

Modules, in the order ``validate()`` runs them: ``logs`` (metadata, offsets, commits),
``sources`` (source logs), ``state`` (versions a restart loads, operator metadata, schemas)
with ``lineage`` (format-v2 changelog lineage), ``listing`` (what the listing alone shows),
``pool`` (decoding the queued files, ``files`` in the workers), ``upgrade`` (Spark 4.0's
v2 zips on Spark 4.1+), ``orphans``, ``links``
(symbolic links). ``context.ValidationRun`` is the state they share, ``codes`` every code
and severity, ``report`` the result. ``headline`` is the verdict in one line (``ckpt
versions``, ``ckpt report``): the same call in the default scope, so they cannot disagree.
"""

from ckpt_cli.validate.codes import (
    CODES,
    ERROR,
    INFO,
    WARNING,
    format_error_code,
)
from ckpt_cli.validate.report import Finding, ValidationReport
from ckpt_cli.validate.runner import validate

__all__ = [
    "CODES",
    "ERROR",
    "INFO",
    "WARNING",
    "Finding",
    "ValidationReport",
    "format_error_code",
    "validate",
]
