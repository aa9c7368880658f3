"""The one line an operator reads first: when the query last wrote, its watermark, the last
committed batch, and whether it can restart, and if not, why.

Restartability is ``validate``'s verdict on a restart (its checks of the logs, the sources'
logs, the listing and the plan of the state versions a restart loads), without decoding the
state files (``decode=False``): a listing and a few small reads. Read tolerantly, so that an
unreadable latest offsets entry is a reason, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.units import iso_ms
from ckpt_cli.validate import ERROR, validate

# The log files whose modification time says when the query last did something.
_ACTIVITY_KINDS = (FileKind.OFFSETS, FileKind.COMMIT)


@dataclass(frozen=True)
class Headline:
    # The newest offsets/ or commits/ file written (listing mtime), else the newest planned.
    last_activity_ms: int | None
    last_activity: str | None
    latest_planned: str | None  # batchTimestampMs of the newest readable offsets entry
    watermark: str | None  # its batchWatermarkMs (None: no watermark)
    latest_committed: int | None
    restartable: bool
    because: list[str]  # validate's errors, most severe first; empty when restartable
    codes: list[str]
    decoded: bool  # False: state files were planned and found, not decoded

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def headline(checkpoint: Checkpoint) -> Headline:
    """The headline of ``checkpoint``; never raises for a damaged log entry."""
    view = checkpoint.tolerant_view()
    report = validate(view, decode=False)
    errors = report.at_or_above(ERROR)
    times = [f.entry.mtime for f in checkpoint.of_kind(*_ACTIVITY_KINDS) if f.entry.mtime]
    activity = int(max(times) * 1000) if times else None
    try:
        latest = view.latest_offsets
    except FormatError:  # the tolerant view skips unreadable entries; nothing readable
        latest = None
    watermark = latest.batch_watermark_ms if latest else None
    if activity is None and latest is not None:
        activity = latest.batch_timestamp_ms  # a store that gives no modification times
    return Headline(
        last_activity_ms=activity,
        last_activity=iso_ms(activity),
        latest_planned=iso_ms(latest.batch_timestamp_ms) if latest else None,
        # 0 is Spark's "no watermark yet".
        watermark=iso_ms(watermark) if watermark else None,
        latest_committed=checkpoint.batches.latest_committed,
        restartable=not errors,
        because=[f.message for f in errors],
        codes=sorted({f.code for f in errors}),
        decoded=False,
    )
