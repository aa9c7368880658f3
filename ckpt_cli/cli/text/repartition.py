"""``ckpt repartition`` as a plan table and what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import RepartitionPlan, RepartitionRun, skew
from ckpt_cli.cli.text import plan_first, print_batch_plan, print_changed, render_text, store_table
from ckpt_cli.cli.text.fit import Flow, labelled
from ckpt_cli.units import human_bytes, natural_key

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


def _skew(values: list[int]) -> str:
    s = skew(values)
    return "-" if s is None else f"{s:.2f}"


def _dirs(dirs: list[str]) -> str:
    """Partition directories, as ranges where they run on: ``state/0/2-199``."""
    from ckpt_cli.cli.text.versions import ranges

    by_parent: dict[str, list[int]] = {}
    other = []
    for d in dirs:
        parent, _, name = d.rpartition("/")
        if name.isdigit():
            by_parent.setdefault(parent, []).append(int(name))
        else:
            other.append(d)
    runs = []
    for parent, ids in by_parent.items():
        run = ranges(sorted(ids))
        runs.append(f"{parent}/{{{run}}}" if "," in run else f"{parent}/{run}")
    return ", ".join(runs + other)


def _counts(values: list[int]) -> str:
    """Every partition's count, or for many partitions their range."""
    if len(values) <= 12:
        return " ".join(map(str, values))
    return f"{len(values)} partitions, {min(values)}-{max(values)}"


@render_text.register(RepartitionPlan)
def _plan(plan: RepartitionPlan, out: TextRenderer) -> None:
    what = f"{plan.from_partitions} -> {plan.partitions} partitions"
    numbers = ["keys", "bytes", "skew"]
    table = store_table("State per operator and store (before -> after)", numbers)
    table.add_column("keys per partition")
    for s in plan.stores:
        table.add_row(
            str(s.operator),
            Flow.plain(s.store),
            str(sum(s.keys_before)),
            human_bytes(sum(s.bytes_before)),
            f"{_skew(s.keys_before)} -> {_skew(s.keys_after)}",
            f"{_counts(s.keys_before)} -> {_counts(s.keys_after)}",
        )
    files = [f for s in plan.stores for f in s.files]
    shown = ", ".join(sorted(files, key=natural_key)[:3]) + (", ..." if len(files) > 3 else "")
    writes = f"{len(files)} state files ({shown}) and {', '.join(plan.log_files)}"
    print_batch_plan(
        out, plan, plan.provider, "Repartition", what, body=[table], writes=("Writes", writes)
    )


@render_text.register(RepartitionRun)
def _run(run: RepartitionRun, out: TextRenderer) -> None:
    result = plan_first(run, out)
    if result is None:
        return
    written = f"{len(result.written)} files written ({human_bytes(sum(result.written.values()))})"
    then = []
    if result.left_over:
        left = sorted(result.left_over, key=natural_key)
        then.append(
            labelled(
                "Left over:",
                "bold",
                f"{len(left)} partition directories the query no longer uses "
                f"({_dirs(left)}); `ckpt cleanup` removes them once no retained batch before "
                "the repartition needs them.",
            )
        )
    done = ("Repartitioned:", f"{written}, {len(result.rewritten)} replaced")
    print_changed(out, result, done, undo="repartition", change="repartition", then=then)
