"""Progress drawn for people: a transient Rich bar on stderr (the library only reports)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


class RichProgress:
    """A ProgressSink drawing a transient Rich progress bar (or spinner) on stderr."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def start(self, description: str, total: int | None = None) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(description, total=total)
        else:
            self._progress.update(self._task, description=description, total=total, completed=0)

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)

    def close(self) -> None:
        if self._task is not None:
            self._progress.stop()
            self._task = None
