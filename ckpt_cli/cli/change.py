"""What the commands that change a checkpoint share (cleanup, convert, relocate, repair,
repartition, state delete): their options, and the preamble that checks them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from ckpt_cli.api import Guards, Storage, UndoResult
from ckpt_cli.cli.common import (
    OptionGroup,
    ResultT,
    Session,
    SharedOptions,
    manifest_option,
    parse_duration,
    start,
)
from ckpt_cli.errors import UsageError

RetainOpt = Annotated[
    int | None,
    typer.Option(
        "--retain",
        min=1,
        metavar="N",
        help="Batches to keep restartable (default: spark.sql.streaming.minBatchesToRetain "
        "from the offsets conf, else Spark's default 100).",
        show_default=False,
    ),
]
ApplyOpt = Annotated[
    bool,
    typer.Option("--apply", help="Carry the plan out (without it: a dry run, nothing changes)."),
]
YesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask before changing anything (scripts, cron).")
]
MinAgeOpt = Annotated[
    str,
    typer.Option(
        "--min-age",
        metavar="DURATION",
        help="Files modified more recently than this are left alone, and --apply refuses while "
        "the query looks active (its last batch planned and offsets/ written within it), "
        "unless --force. 30s, 15m, 12h, 3d, 1w or seconds; below the default 1h, --apply needs "
        "--force.",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Go ahead although the query looks active, a file is younger than --min-age, or "
        "--min-age is below the default 1h.",
    ),
]
BreakLockOpt = Annotated[
    bool,
    typer.Option(
        "--break-lock",
        help="Remove a stale checkpoint lock (its process is gone, or it is older than 12 h) "
        "left by a killed cleanup, repair or repartition.",
    ),
]
QuarantineOpt = Annotated[
    str | None,
    typer.Option(
        "--quarantine",
        metavar="DIR",
        help="Where the manifest and the files moved out or replaced go (default: "
        "<checkpoint>.ckpt-quarantine/<time>/, beside the checkpoint).",
        show_default=False,
    ),
]
UndoOpt = Annotated[
    bool,
    typer.Option(
        "--undo",
        help="Put the checkpoint back, byte for byte, as it was before the newest run of this "
        "command (from its manifest in <checkpoint>.ckpt-quarantine/; --manifest picks "
        "another). A second --undo of the same run says it is already undone.",
    ),
]
ManifestOpt = Annotated[
    str | None,
    manifest_option(
        "With --undo: the manifest.json of the run to undo (default: the newest of this "
        "command beside the checkpoint)."
    ),
]


@dataclass(frozen=True)
class ChangeOptions(OptionGroup):
    """How repair and repartition change a checkpoint and put it back."""

    quarantine: QuarantineOpt = None
    undo: UndoOpt = False
    manifest: ManifestOpt = None
    min_age: MinAgeOpt = "1h"
    force: ForceOpt = False
    break_lock: BreakLockOpt = False


def check_change_options(command: str, path: str, change: ChangeOptions, *, apply: bool) -> None:
    """The options of a command that changes a checkpoint, and the old spellings of
    ``--undo`` (a path, ``--quarantine``) with what they are now (one line, exit 2)."""
    undo, quarantine = change.undo, change.quarantine
    if undo and _looks_like_manifest(path):
        raise UsageError(
            f"{command} --undo takes no value: did you mean "
            f"ckpt {command} CHECKPOINT --undo --manifest {path}"
        )
    if change.manifest is not None and not undo:
        raise UsageError(f"--manifest picks the run to undo: add --undo (ckpt {command} --help)")
    if undo and quarantine is not None:
        where = f"{quarantine.rstrip('/')}/manifest.json"
        raise UsageError(
            f"--quarantine is where --apply puts what it moves: did you mean --undo --manifest "
            f"{where}"
        )
    if undo and apply:
        raise UsageError("give --apply or --undo, not both (--undo puts back at once)")


def _looks_like_manifest(path: str) -> bool:
    """A manifest given where the checkpoint goes (``repair --undo MANIFEST``, the old
    spelling): a checkpoint is a directory."""
    return path.rstrip("/").endswith(".json") or os.path.isfile(path)


@dataclass(frozen=True)
class ChangeStart:
    """What a command that changes a checkpoint starts from (:func:`start_change`)."""

    run: Session
    storage: Storage  # the checkpoint's
    guards: Guards  # the change options, as the library takes them
    change: ChangeOptions

    def render(self, result: ResultT) -> ResultT:
        return self.run.render(result)

    def undo(self, undo: Callable[..., UndoResult], **options: Any) -> UndoResult:
        """--undo: the command's ``undo`` of the checkpoint (its manifest and lock options,
        and ``options``), rendered."""
        change = self.change
        return self.render(
            undo(self.storage, manifest=change.manifest, break_lock=change.break_lock, **options)
        )


# What a change command's confirmation refuses to do unattended, where not the command's name.
_ACTIONS = {"repair": "change the checkpoint", "state delete": "delete"}


def start_change(
    command: str, path: str, change: ChangeOptions, *, apply: bool, yes: bool, shared: SharedOptions
) -> ChangeStart:
    """The preamble of a command that changes a checkpoint (convert, relocate, repair,
    repartition, state delete): the session, its options checked (old spellings named), the
    library's arguments they give, and the checkpoint's storage."""
    run = start(shared)
    check_change_options(command, path, change, apply=apply)
    action = _ACTIONS.get(command, command)
    guards = Guards(
        apply=apply,
        force=change.force,
        min_age=parse_duration(change.min_age),
        break_lock=change.break_lock,
        confirm=run.confirm(yes=yes, action=action, unattended=command),
        progress=run.progress,
    )
    return ChangeStart(run, run.storage(path), guards, change)
