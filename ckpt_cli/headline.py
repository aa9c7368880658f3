"""The one line an operator reads first: when the query last ran a batch, its watermark, the
last committed batch, and whether it can restart, and if not, why.

Restartability is ``validate``'s verdict on a restart (its checks of the logs, the sources'
logs, the listing and the plan of the state versions a restart loads), without decoding the
state files (``decode=False``): a listing and a few small reads. Read tolerantly, so that an
unreadable latest offsets entry is a reason, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckpt_cli.cleanup.safety import query_activity
from ckpt_cli.errors import FormatError
from ckpt_cli.model import Checkpoint
from ckpt_cli.units import iso_ms
from ckpt_cli.validate import ERROR, validate

# Planning a batch and writing its offsets entry take well under this, and two machines'
# clocks may differ by seconds: further apart, the files were copied or restored later.
FILES_APART_MS = 60_000


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
    restartable: bool
    because: list[str]  # validate's errors, most severe first; empty when restartable
    codes: list[str]
    decoded: bool  # False: state files were planned and found, not decoded

    @property
    def files_apart(self) -> bool:
        """Whether offsets/ was written apart from the last activity (worth showing)."""
        if self.files_modified_ms is None or self.last_activity_ms is None:
            return False
        return abs(self.files_modified_ms - self.last_activity_ms) > FILES_APART_MS

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def headline(checkpoint: Checkpoint, *, now: float | None = None) -> Headline:
    """The headline of ``checkpoint``; never raises for a damaged log entry."""
    view = checkpoint.tolerant_view()
    report = validate(view, decode=False)
    errors = report.at_or_above(ERROR)
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
        # 0 is Spark's "no watermark yet".
        watermark=iso_ms(watermark) if watermark else None,
        latest_committed=checkpoint.batches.latest_committed,
        restartable=not errors,
        because=[f.message for f in errors],
        codes=sorted({f.code for f in errors}),
        decoded=False,
    )
