"""Bringing a broken checkpoint back to one Spark restarts from, losing nothing.

* :mod:`.plan`: the known repairs, planned from validate's findings (``plan_repair``);
* :mod:`.apply`: carrying a plan out with a write-ahead manifest (``apply_repair``), and
  ``ckpt repair`` as one call (``run_repair``) on the change engine (``ckpt_cli.change``,
  whose ``undo.undo_repair`` puts everything back from that manifest).
"""

from ckpt_cli.change.undo import UndoResult, undo_repair
from ckpt_cli.repair.apply import RepairResult, RepairRun, apply_repair, run_repair
from ckpt_cli.repair.plan import Action, RepairPlan, plan_repair

__all__ = [
    "Action",
    "RepairPlan",
    "RepairResult",
    "RepairRun",
    "UndoResult",
    "apply_repair",
    "plan_repair",
    "run_repair",
    "undo_repair",
]
