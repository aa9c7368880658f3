"""Removing what no retained version needs, without ever breaking a restart.

* :mod:`.retention`: which files Spark's rules still need, and the plan (``plan_cleanup``);
* :mod:`.plan`: the plan's data (deletion classes, their crash-safe order);
* :mod:`.untracked`: RocksDB files no zip names, attempts the commit log did not choose;
* :mod:`.safety`: the checks every destructive operation runs (minimum age, active query);
* :mod:`.apply`: deleting a plan (``apply_cleanup``) and ``ckpt cleanup`` as one call;
* :mod:`.scan`: every checkpoint under a prefix (``ckpt orphans --recursive``).
"""

from ckpt_cli.cleanup.apply import CleanupResult, CleanupRun, apply_cleanup, run_cleanup
from ckpt_cli.cleanup.plan import CleanupPlan, Deletion
from ckpt_cli.cleanup.retention import plan_cleanup
from ckpt_cli.cleanup.scan import OrphanScan, ScanFailure, scan_orphans

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
