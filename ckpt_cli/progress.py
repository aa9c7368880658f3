"""Progress reporting without drawing: the library talks to a sink, the CLI decides how to draw."""

from __future__ import annotations

from typing import Protocol


class ProgressSink(Protocol):
    """Receives progress of a long library operation (listing, reading many files...)."""

    def start(self, description: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    """The default sink: does nothing."""

    def start(self, description: str, total: int | None = None) -> None:
        return None

    def advance(self, n: int = 1) -> None:
        return None

    def close(self) -> None:
        return None


NULL_PROGRESS: ProgressSink = NullProgress()
