"""Removing what no retained version needs, without ever breaking a restart.

* :mod:`.retention`: which files Spark's rules still need, and the plan (``plan_cleanup``);
* :mod:`.plan`: the plan's data (deletion classes, their crash-safe order);
* :mod:`.partitions`: partition directories a repartition to fewer left behind;
* :mod:`.apply`: deleting a plan (``apply_cleanup``) and ``ckpt cleanup`` as one call;
* :mod:`.scan`: every checkpoint under a prefix (``ckpt orphans --recursive``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ckpt_cli.cleanup.apply import CleanupResult, CleanupRun, apply_cleanup, run_cleanup
    from ckpt_cli.cleanup.plan import CleanupPlan, Deletion
    from ckpt_cli.cleanup.retention import plan_cleanup
    from ckpt_cli.cleanup.scan import OrphanScan, ScanFailure, scan_orphans

# Imported on first use: a caller of one name does not import the planning, deleting and
# scanning code behind the others.
_MODULES = {
    "CleanupResult": ".apply",
    "CleanupRun": ".apply",
    "apply_cleanup": ".apply",
    "run_cleanup": ".apply",
    "CleanupPlan": ".plan",
    "Deletion": ".plan",
    "plan_cleanup": ".retention",
    "OrphanScan": ".scan",
    "ScanFailure": ".scan",
    "scan_orphans": ".scan",
}

__all__ = [
    "CleanupPlan",
    "CleanupResult",
    "CleanupRun",
    "Deletion",
    "OrphanScan",
    "ScanFailure",
    "apply_cleanup",
    "plan_cleanup",
    "run_cleanup",
    "scan_orphans",
]

__getattr__ = lazy_exports(__name__, _MODULES)
