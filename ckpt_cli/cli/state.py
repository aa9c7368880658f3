"""``ckpt state``: commands that change a query's state (``ckpt state delete``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import DeleteRun, UndoResult, read_keys_file, run_delete, undo_delete
from ckpt_cli.cli.change import ApplyOpt, ChangeOptions, YesOpt, start_change
from ckpt_cli.cli.coercion import CkptCommand
from ckpt_cli.cli.common import (
    EngineOptions,
    PathArg,
    SharedOptions,
    check_output_file,
    error_boundary,
    given,
    output_option,
    state_var_option,
)
from ckpt_cli.cli.helptext import unwrap
from ckpt_cli.cli.usage import CkptGroup

app = typer.Typer(
    name="state",
    cls=CkptGroup,
    help="Change a stateful query's state offline: ckpt state delete.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@error_boundary
def delete(
    path: PathArg,
    operator: Annotated[
        int | None, typer.Option("--operator", metavar="N", help="The stateful operator (state/N).")
    ] = None,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            "-w",
            metavar="EXPR",
            help="The keys to delete: comparisons of key.* and value.* columns (=, !=, <, "
            "<=, >, >=, in (...), is null) joined by and / or, e.g. \"key.user = 'u1'\".",
            show_default=False,
        ),
    ] = None,
    keys: Annotated[
        str | None,
        typer.Option(
            "--keys",
            metavar="FILE",
            help="The keys to delete, one per line as JSON (the rows ckpt replay prints).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str | None,
        output_option(
            "Write the matched rows (what is removed) to FILE as JSON lines, first.",
            show_default=False,
        ),
    ] = None,
    state_var: Annotated[
        str | None,
        state_var_option(
            "transformWithState: remove the keys from this state variable only (with its "
            "TTL entries); value.* then selects on its values."
        ),
    ] = None,
    timers: Annotated[
        bool,
        typer.Option(
            "--timers",
            help="transformWithState: remove the keys' registered timers only.",
        ),
    ] = False,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    engine_options: EngineOptions = EngineOptions(),
    change: ChangeOptions = ChangeOptions(),
    shared: SharedOptions = SharedOptions(),
) -> DeleteRun | UndoResult:
    """Remove keys from a stateful query's state offline: a poison key, an erasure
    request, state that grew without a watermark.

    The last committed batch is N: batch N+1 becomes a deletion batch (offsets/N+1 a copy of
    offsets/N, commits/N+1) whose state version N+2 is what Spark writes for a batch that
    removed the keys: a .delta of removals (HDFS-backed store), a changelog of deletes
    (RocksDB with changelog checkpointing), else a new zip of the keys left; the other
    operators' state unchanged. A key is the operator's grouping key (aggregations,
    dropDuplicates, flatMapGroupsWithState), a session window's key with all its sessions,
    a stream-stream join's key (key.field0...), from both sides' stores together, or
    transformWithState's grouping key, from every column family that holds it (values,
    lists, map entries, TTL entries, timers): --state-var or --timers for one of them.

    A dry run by default: keys matched per partition, bytes freed, a sample; --output writes
    the matched rows for audit. --apply writes it (asks first unless --yes; refuses while the
    query looks active unless --force; holds the checkpoint lock) and ends with a
    validation. --undo restores every byte from the newest deletion's manifest.

    --engine spark matches and writes the store partitions as Spark tasks (a state larger
    than one machine), staged beside the checkpoint and moved in by this process.

    Exit code 0 when the plan is made, the deletion is written and validates, or it is
    undone, 1 when the checkpoint has errors after it, 2 when it refuses or cannot run.

    Examples:

      ckpt state delete /data/ckpt/q1 --operator 0 --where "key.user = 'u1'"

      ckpt state delete /data/q1 --operator 0 --keys poison.jsonl --apply -y

      ckpt state delete /data/q2 --operator 0 --state-var cart -w "value.n > 99"

      ckpt state delete /data/ckpt/q1 --undo
    """
    check_output_file(output)
    started = start_change("state delete", path, change, apply=apply, yes=yes, shared=shared)
    if change.undo:
        return started.undo(undo_delete, force=change.force)
    result = run_delete(
        started.storage,
        started.guards,
        operator=given(operator, "give the operator: --operator N (ckpt versions lists them)"),
        where=where,
        keys=read_keys_file(keys) if keys is not None else None,
        output=output,
        state_var=state_var,
        timers=timers,
        quarantine=change.quarantine,
        # The local engine matches and writes in this process, a partition at a time.
        engine=engine_options.distributed(),
    )
    return started.render(result)


app.command(name="delete", cls=CkptCommand, help=unwrap(delete.__doc__))(delete)
