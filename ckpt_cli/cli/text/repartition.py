"""``ckpt repartition`` as a plan table and what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import RepartitionPlan, RepartitionRun, skew
from ckpt_cli.cli.text import (
    plan_first,
    print_batch_change,
    print_changed,
    print_notes,
    render_text,
)
from ckpt_cli.cli.text.fit import FitTable, Flow, labelled
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
    console = out.console
    what = f"{plan.from_partitions} -> {plan.partitions} partitions"
    print_batch_change(out, plan, plan.provider, "Repartition", what)
    table = FitTable(title="State per operator and store (before -> after)", title_justify="left")
    table.add_column("op", justify="right")
    table.add_column("store")
    table.add_column("keys", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("skew", justify="right")
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
    console.print(table)
    files = [f for s in plan.stores for f in s.files]
    shown = ", ".join(sorted(files, key=natural_key)[:3]) + (", ..." if len(files) > 3 else "")
    console.print(
        labelled(
            "Writes", "bold", f"{len(files)} state files ({shown}) and {', '.join(plan.log_files)}"
        )
    )
    print_notes(out, plan.notes, plan.warnings)


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
