"""The one line an operator reads first: when the query last ran a batch, its watermark, the
last committed batch, and whether it can restart, and if not, why.

Restartability is ``validate``'s verdict in its default scope, what a restart loads: the same
call, so ``ckpt versions``, ``ckpt report``, ``ckpt validate`` and ``ckpt repair`` give one
answer. One difference, for speed on large states: when the deltas, snapshots and changelogs
a restart loads total more than ``DECODE_BYTES``, they are planned and found but not
decoded, and the headline says "not known" with what it did not check rather than "yes"
(RocksDB zips, and the SSTs and logs they name, are always read). Read tolerantly, so that
an unreadable latest offsets entry is a reason, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.activity import query_activity
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import FormatError
from ckpt_cli.units import human_bytes, iso_ms, watermark_iso
from ckpt_cli.validate import ERROR, ValidationReport, validate

# Planning a batch and writing its offsets entry take well under this, and two machines'
# clocks may differ by seconds: further apart, the files were copied or restored later.
FILES_APART_MS = 60_000
# The restart's state files decoded for the headline at most (about a second of work).
DECODE_BYTES = 16 << 20


@dataclass(frozen=True)
class Headline:
    # When the last batch was planned (its batchTimestampMs: the age `ckpt batches` shows for
    # it), else when offsets/ was last written; ages in seconds, negative for a time ahead of
    # this machine's clock.
    last_activity_ms: int | None
    last_activity: str | None
    last_activity_age_seconds: float | None
    # When offsets/ was last written (the listing's modification times): apart from the last
    # activity after a copy, a restore or a download.
    files_modified_ms: int | None
    files_modified: str | None
    files_modified_age_seconds: float | None
    latest_planned: str | None  # batchTimestampMs of the newest readable offsets entry
    watermark: str | None  # its batchWatermarkMs (None: no watermark)
    latest_committed: int | None
    # validate's verdict; None: nothing found, but the state files were not decoded.
    restartable: bool | None
    because: list[str]  # validate's errors, most severe first; empty when restartable
    codes: list[str]
    decoded: bool  # False: the restart's state files were planned and found, not decoded
    # The files not decoded ({"files", "bytes"}); None when every one was.
    not_decoded: dict[str, int] | None = None

    @property
    def files_apart(self) -> bool:
        """Whether offsets/ was written apart from the last activity (worth showing)."""
        if self.files_modified_ms is None or self.last_activity_ms is None:
            return False
        return abs(self.files_modified_ms - self.last_activity_ms) > FILES_APART_MS

    @property
    def unchecked(self) -> str:
        """What the verdict did not check ("" when it checked everything a restart loads)."""
        if not self.not_decoded:
            return ""
        files, size = self.not_decoded["files"], human_bytes(self.not_decoded["bytes"])
        return (
            f"{files:,} state files ({size}) a restart loads were found, not decoded; "
            "ckpt validate decodes them"
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def headline(
    checkpoint: Checkpoint, *, now: float | None = None, report: ValidationReport | None = None
) -> Headline:
    """The headline of ``checkpoint``; never raises for a damaged log entry. ``report``:
    ``validate``'s default-scope report of it, when the caller has one (nothing is checked
    twice)."""
    view = checkpoint.tolerant_view()
    if report is None:
        report = validate(view, decode_limit=DECODE_BYTES)
    errors = report.at_or_above(ERROR)
    not_decoded = report.target.get("not_decoded")
    # The activity the safety checks judge: the same batch time and file time.
    activity = query_activity(view, now=now)
    try:
        latest = view.latest_offsets
    except FormatError:  # the tolerant view skips unreadable entries; nothing readable
        latest = None
    watermark = latest.batch_watermark_ms if latest else None
    last, last_age = activity.planned_ms, activity.planned_age
    if last is None:  # unreadable, or no batch time: when offsets/ was written
        last, last_age = activity.written_ms, activity.written_age
    return Headline(
        last_activity_ms=last,
        last_activity=iso_ms(last),
        last_activity_age_seconds=last_age,
        files_modified_ms=activity.written_ms,
        files_modified=iso_ms(activity.written_ms),
        files_modified_age_seconds=activity.written_age,
        latest_planned=iso_ms(latest.batch_timestamp_ms) if latest else None,
        watermark=watermark_iso(watermark),
        latest_committed=checkpoint.batches.latest_committed,
        restartable=False if errors else (None if not_decoded else True),
        because=[f.message for f in errors],
        codes=sorted({f.code for f in errors}),
        decoded=not not_decoded,
        not_decoded=not_decoded,
    )
