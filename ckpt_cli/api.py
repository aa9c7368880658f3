"""The Python API: the library's calls in one place, and :class:`Checkpoint`, the checkpoint
of the core model with one method per command.

    >>> import ckpt_cli
    >>> ckpt = ckpt_cli.open("s3://bucket/query", {"anon": False})
    >>> ckpt.validate().ok
    >>> ckpt.replay(operator=0).to_pandas()

Each method *is* a library function with the checkpoint bound as its first argument (the
descriptor :class:`Call`): its signature, defaults and docstring are the function's, so the
API cannot drift from the library. The model does not know its methods (it imports nothing
above it); they are attached here, and each command's module is imported on the method's
first use (``ckpt versions`` does not import replay's Arrow code).

The CLI imports what it calls from this module only (an import contract says so): the
commands' ``run_*`` functions and the result types its renderers show.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ckpt_cli.core import model
from ckpt_cli.lazy import lazy_exports

P = ParamSpec("P")
R = TypeVar("R")


class _Later:
    """A library function imported on first use (the API's modules stay unimported until a
    method needs them)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    @functools.cached_property
    def function(self) -> Callable[..., Any]:
        found: Callable[..., Any] = getattr(importlib.import_module(self.module), self.name)
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


# The library functions the methods call, by module (each a _Later until type checking).
_METHOD_FUNCTIONS = {
    "describe_versions": "ckpt_cli.versions",
    "batch_timeline": "ckpt_cli.batches",
    "disk_usage": "ckpt_cli.du",
    "write_report": "ckpt_cli.report",
    "validate": "ckpt_cli.validate.runner",
    "read_state": "ckpt_cli.state.reader",
    "plan_cleanup": "ckpt_cli.cleanup.retention",
    "plan_repair": "ckpt_cli.repair.plan",
    "plan_repartition": "ckpt_cli.repartition.plan",
    "repartition_checkpoint": "ckpt_cli.repartition.run",
    "undo_repair": "ckpt_cli.change.undo",
    "undo_repartition": "ckpt_cli.repartition.run",
    "plan_convert": "ckpt_cli.convert.plan",
    "convert_checkpoint": "ckpt_cli.convert.run",
    "undo_convert": "ckpt_cli.convert.run",
    "relocate_checkpoint": "ckpt_cli.relocate.run",
    "undo_relocate": "ckpt_cli.relocate.undo",
    "plan_delete": "ckpt_cli.delete.plan",
    "undo_delete": "ckpt_cli.delete.run",
}

if TYPE_CHECKING:
    from ckpt_cli.batches import BatchesReport, BatchRow, SourceProgress, batch_timeline
    from ckpt_cli.change.flow import Guards
    from ckpt_cli.change.undo import UndoResult, undo_repair
    from ckpt_cli.cleanup import (
        CleanupPlan,
        CleanupRun,
        OrphanScan,
        ScanFailure,
        run_cleanup,
        scan_orphans,
    )
    from ckpt_cli.cleanup.plan import DESCRIPTIONS
    from ckpt_cli.cleanup.retention import plan_cleanup
    from ckpt_cli.convert.plan import ConvertPlan, plan_convert
    from ckpt_cli.convert.run import ConvertRun, convert_checkpoint, run_convert, undo_convert
    from ckpt_cli.delete.plan import DeletePlan, plan_delete, read_keys_file
    from ckpt_cli.delete.run import DeleteRun, run_delete, undo_delete
    from ckpt_cli.du import DEFAULT_TOP, DiskUsageReport, Usage, disk_usage
    from ckpt_cli.inspect import DEFAULT_LIMIT, FileReport, inspect_file, split_file_location
    from ckpt_cli.relocate.plan import RelocatePlan, parse_inputs
    from ckpt_cli.relocate.run import RelocateRun, relocate_checkpoint, run_relocate
    from ckpt_cli.relocate.undo import RelocateUndoResult, undo_relocate
    from ckpt_cli.repair import RepairPlan, RepairRun, run_repair
    from ckpt_cli.repair.plan import plan_repair
    from ckpt_cli.repartition.plan import RepartitionPlan, plan_repartition, skew
    from ckpt_cli.repartition.run import (
        RepartitionRun,
        repartition_checkpoint,
        run_repartition,
        undo_repartition,
    )
    from ckpt_cli.replay.run import TABLE_LIMIT, ReplayRun, kernel_note, run_replay
    from ckpt_cli.report import HtmlReport, require_plotly, write_report
    from ckpt_cli.state.reader import StateRows, read_state
    from ckpt_cli.state.target import ReplayTarget, SelectionError
    from ckpt_cli.storage import Storage, StorageStats
    from ckpt_cli.validate import ERROR, INFO, WARNING, Finding, ValidationReport
    from ckpt_cli.validate.codes import CODES, SEVERITY_RANK
    from ckpt_cli.validate.headline import Headline
    from ckpt_cli.validate.runner import validate
    from ckpt_cli.versions import (
        OperatorVersions,
        PartitionVersions,
        VersionsReport,
        describe_versions,
    )
else:
    globals().update({name: _Later(module, name) for name, module in _METHOD_FUNCTIONS.items()})


def _function(fn: Any) -> Callable[..., Any]:
    found: Callable[..., Any] = fn.function if isinstance(fn, _Later) else fn
    return found


def _storage(ckpt: model.Checkpoint) -> Storage:
    return ckpt.storage


class Call(Generic[P, R]):
    """A method that is ``fn`` with the checkpoint (or what ``via`` makes of it, e.g. its
    storage) as the first argument."""

    def __init__(
        self, fn: Callable[Concatenate[Any, P], R], via: Callable[[Any], Any] | None = None
    ) -> None:
        self._fn = fn
        self._via = via

    @property
    def function(self) -> Callable[..., R]:
        """The library function the method calls."""
        return _function(self._fn)

    @property
    def via_storage(self) -> bool:
        """Whether the function is given the checkpoint's storage rather than the checkpoint."""
        return self._via is _storage

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Call[P, R]: ...

    @overload
    def __get__(self, obj: model.Checkpoint, owner: type[Any]) -> Callable[P, R]: ...

    def __get__(self, obj: model.Checkpoint | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        first = obj if self._via is None else self._via(obj)
        bound = functools.partial(self.function, first)
        functools.update_wrapper(bound, self.function)
        return bound


class Checkpoint(model.Checkpoint):
    """The checkpoint at a location, listed once (:class:`ckpt_cli.core.model.Checkpoint`),
    with one method per command; each is the library function named, with this checkpoint
    as its first argument."""

    #: ``ckpt versions``: :func:`ckpt_cli.versions.describe_versions`
    versions = Call(describe_versions)
    #: ``ckpt batches``: :func:`ckpt_cli.batches.batch_timeline` (``.batches`` is the logs')
    timeline = Call(batch_timeline)
    #: ``ckpt du``: :func:`ckpt_cli.du.disk_usage`
    disk_usage = Call(disk_usage)
    #: ``ckpt report``: :func:`ckpt_cli.report.write_report`
    report = Call(write_report)
    #: ``ckpt validate``: :func:`ckpt_cli.validate.validate`
    validate = Call(validate)
    #: ``ckpt replay``: :func:`ckpt_cli.state.reader.read_state`
    replay = Call(read_state)
    #: ``ckpt cleanup`` without ``--apply``: :func:`ckpt_cli.cleanup.retention.plan_cleanup`
    plan_cleanup = Call(plan_cleanup)
    #: ``ckpt repair`` without ``--apply``: :func:`ckpt_cli.repair.plan.plan_repair`
    plan_repair = Call(plan_repair)
    #: ``ckpt repartition`` without ``--apply``: :func:`ckpt_cli.repartition.plan.plan_repartition`
    plan_repartition = Call(plan_repartition)
    #: ``ckpt repartition --apply --yes``: :func:`ckpt_cli.repartition.run.repartition_checkpoint`
    repartition = Call(repartition_checkpoint)
    #: ``ckpt convert`` without ``--apply``: :func:`ckpt_cli.convert.plan.plan_convert`
    plan_convert = Call(plan_convert)
    #: ``ckpt convert --apply --yes``: :func:`ckpt_cli.convert.run.convert_checkpoint`
    convert = Call(convert_checkpoint)
    #: ``ckpt relocate --apply --yes``: :func:`ckpt_cli.relocate.run.relocate_checkpoint`
    relocate = Call(relocate_checkpoint)
    #: ``ckpt state delete`` without ``--apply``: :func:`ckpt_cli.delete.plan.plan_delete`
    plan_delete = Call(plan_delete)
    #: ``ckpt state delete --undo``: :func:`ckpt_cli.delete.run.undo_delete`
    undo_delete = Call(undo_delete, via=_storage)
    #: ``ckpt repair --undo``: :func:`ckpt_cli.change.undo.undo_repair`
    undo_repair = Call(undo_repair, via=_storage)
    #: ``ckpt repartition --undo``: :func:`ckpt_cli.repartition.run.undo_repartition`
    undo_repartition = Call(undo_repartition, via=_storage)
    #: ``ckpt convert --undo``: :func:`ckpt_cli.convert.run.undo_convert`
    undo_convert = Call(undo_convert, via=_storage)
    #: ``ckpt relocate --undo``: :func:`ckpt_cli.relocate.undo.undo_relocate`
    undo_relocate = Call(undo_relocate, via=_storage)


def methods() -> dict[str, Call[Any, Any]]:
    """Every command method of :class:`Checkpoint`, by name (the docs list them)."""
    return {name: value for name, value in vars(Checkpoint).items() if isinstance(value, Call)}


def open(  # noqa: A001 - ckpt_cli.open, like fsspec.open
    location: str, storage_options: Mapping[str, Any] | None = None
) -> Checkpoint:
    """The checkpoint at ``location`` (a path or URL: s3://, abfs://, gs://, memory://...),
    listed once; ``storage_options`` go to the filesystem (e.g. ``endpoint_url``)."""
    return Checkpoint.open(location, storage_options)


# What the CLI (and any caller) takes from here, by module: imported on first use, so a
# command's run imports only what it calls.
_EXPORTS = {
    "BatchRow": "ckpt_cli.batches",
    "BatchesReport": "ckpt_cli.batches",
    "SourceProgress": "ckpt_cli.batches",
    "batch_timeline": "ckpt_cli.batches",
    "CleanupPlan": "ckpt_cli.cleanup",
    "CleanupRun": "ckpt_cli.cleanup",
    "OrphanScan": "ckpt_cli.cleanup",
    "ScanFailure": "ckpt_cli.cleanup",
    "run_cleanup": "ckpt_cli.cleanup",
    "scan_orphans": "ckpt_cli.cleanup",
    "DESCRIPTIONS": "ckpt_cli.cleanup.plan",
    "DEFAULT_TOP": "ckpt_cli.du",
    "DiskUsageReport": "ckpt_cli.du",
    "Usage": "ckpt_cli.du",
    "DEFAULT_LIMIT": "ckpt_cli.inspect",
    "FileReport": "ckpt_cli.inspect",
    "inspect_file": "ckpt_cli.inspect",
    "split_file_location": "ckpt_cli.inspect",
    "RepairPlan": "ckpt_cli.repair",
    "RepairRun": "ckpt_cli.repair",
    "run_repair": "ckpt_cli.repair",
    "UndoResult": "ckpt_cli.change.undo",
    "Guards": "ckpt_cli.change.flow",
    "ConvertPlan": "ckpt_cli.convert.plan",
    "ConvertRun": "ckpt_cli.convert.run",
    "DeletePlan": "ckpt_cli.delete.plan",
    "read_keys_file": "ckpt_cli.delete.plan",
    "DeleteRun": "ckpt_cli.delete.run",
    "run_delete": "ckpt_cli.delete.run",
    "RelocatePlan": "ckpt_cli.relocate.plan",
    "parse_inputs": "ckpt_cli.relocate.plan",
    "RelocateRun": "ckpt_cli.relocate.run",
    "run_relocate": "ckpt_cli.relocate.run",
    "RelocateUndoResult": "ckpt_cli.relocate.undo",
    "undo_relocate": "ckpt_cli.relocate.undo",
    "run_convert": "ckpt_cli.convert.run",
    "RepartitionPlan": "ckpt_cli.repartition.plan",
    "skew": "ckpt_cli.repartition.plan",
    "RepartitionRun": "ckpt_cli.repartition.run",
    "run_repartition": "ckpt_cli.repartition.run",
    "ReplayRun": "ckpt_cli.replay.run",
    "TABLE_LIMIT": "ckpt_cli.replay.run",
    "kernel_note": "ckpt_cli.replay.run",
    "run_replay": "ckpt_cli.replay.run",
    "ReplayTarget": "ckpt_cli.state.target",
    "SelectionError": "ckpt_cli.state.target",
    "StateRows": "ckpt_cli.state.reader",
    "HtmlReport": "ckpt_cli.report",
    "require_plotly": "ckpt_cli.report",
    "Storage": "ckpt_cli.storage",
    "StorageStats": "ckpt_cli.storage",
    "ERROR": "ckpt_cli.validate",
    "INFO": "ckpt_cli.validate",
    "WARNING": "ckpt_cli.validate",
    "ValidationReport": "ckpt_cli.validate",
    "Finding": "ckpt_cli.validate",
    "CODES": "ckpt_cli.validate.codes",
    "SEVERITY_RANK": "ckpt_cli.validate.codes",
    "Headline": "ckpt_cli.validate.headline",
    "OperatorVersions": "ckpt_cli.versions",
    "PartitionVersions": "ckpt_cli.versions",
    "VersionsReport": "ckpt_cli.versions",
}

__all__ = [
    "BatchRow",
    "BatchesReport",
    "CODES",
    "Call",
    "Checkpoint",
    "CleanupPlan",
    "CleanupRun",
    "ConvertPlan",
    "ConvertRun",
    "DEFAULT_LIMIT",
    "DEFAULT_TOP",
    "DeletePlan",
    "DeleteRun",
    "DESCRIPTIONS",
    "DiskUsageReport",
    "ERROR",
    "FileReport",
    "Finding",
    "Guards",
    "Headline",
    "HtmlReport",
    "INFO",
    "OperatorVersions",
    "OrphanScan",
    "PartitionVersions",
    "RelocatePlan",
    "RelocateRun",
    "RepairPlan",
    "RepairRun",
    "RepartitionPlan",
    "RepartitionRun",
    "ReplayRun",
    "ReplayTarget",
    "SEVERITY_RANK",
    "ScanFailure",
    "SelectionError",
    "SourceProgress",
    "TABLE_LIMIT",
    "StateRows",
    "Storage",
    "StorageStats",
    "UndoResult",
    "Usage",
    "RelocateUndoResult",
    "ValidationReport",
    "VersionsReport",
    "WARNING",
    "batch_timeline",
    "convert_checkpoint",
    "describe_versions",
    "disk_usage",
    "inspect_file",
    "kernel_note",
    "methods",
    "open",
    "plan_cleanup",
    "plan_delete",
    "plan_convert",
    "parse_inputs",
    "plan_repair",
    "plan_repartition",
    "read_keys_file",
    "read_state",
    "relocate_checkpoint",
    "repartition_checkpoint",
    "require_plotly",
    "run_cleanup",
    "run_delete",
    "run_convert",
    "run_relocate",
    "run_repair",
    "run_repartition",
    "run_replay",
    "scan_orphans",
    "skew",
    "split_file_location",
    "undo_convert",
    "undo_delete",
    "undo_repair",
    "undo_relocate",
    "undo_repartition",
    "validate",
    "write_report",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
