"""Text that fits the terminal: paths fold at ``/``, tables that cannot fit become records.

Rich wraps text at spaces and cuts a word longer than the line anywhere, so a checkpoint path
(``state/0/1/.8_003e9d55-75e0-46f6-9fff-af918dbb4843.zip.crc``) broke inside a UUID.
:class:`Flow` wraps at spaces too, but breaks a word too long for a line after one of its
``/``; a segment is cut only when it alone is wider than the line. :class:`FitTable` is a
Rich table that, when its columns cannot be made wide enough for the segments of its paths,
shows each row as a record (``name  value`` lines) instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

_WORD = re.compile(r"\S+\s*")
_PIECE = re.compile(r"[^/]*/+|[^/]+")


def _pieces(word: str) -> list[str]:
    """Where a word may break: after each run of ``/``."""
    return _PIECE.findall(word)


def _spans(line: str, width: int, indent: int) -> list[tuple[int, int]]:
    """(start, end) in ``line`` (no newline in it) of each wrapped line: the first at most
    ``width`` wide (its leading spaces kept), the others ``width - indent`` (theirs dropped)."""
    spans: list[tuple[int, int]] = []
    start = end = 0  # the line being filled is line[start:end]
    room, rest = max(1, width), max(1, width - indent)
    empty = True

    def flush(at: int) -> None:
        nonlocal start, end, room, empty
        spans.append((start, end))
        start = end = at
        room, empty = rest, True

    for match in _WORD.finditer(line):
        word = match.group().rstrip()
        w0 = match.start()
        w1 = w0 + len(word)
        if empty and spans:
            start = w0  # a continuation line starts at its word
        if w1 - start <= room:
            end, empty = w1, False
            continue
        if len(word) <= rest:  # on a line of its own it fits: move it there
            flush(w0)
            end, empty = w1, False
            continue
        # Longer than any line (a path): break it after a '/', inside a piece only when the
        # piece alone is longer than a line.
        position = w0
        for piece in _pieces(word):
            p1 = position + len(piece)
            if not empty and p1 - start > room:
                flush(position)
            elif empty and spans:
                start = position
            while p1 - start > room:
                end = start + room
                flush(end)
            end, empty = p1, False
            position = p1
    spans.append((start, end))
    return spans


class Flow:
    """Text wrapped at spaces, and a word too long for a line (a path) after a ``/``.

    ``indent``: spaces before every wrapped line but the first (a hanging indent); a
    newline in the text starts a line of its own."""

    def __init__(self, text: Text | str, *, indent: int = 0, style: str = "") -> None:
        self.text = Text.from_markup(text, style=style) if isinstance(text, str) else text
        self.indent = indent

    @classmethod
    def plain(cls, text: str, *, indent: int = 0, style: str = "") -> Flow:
        """Text that is no markup (a path, a message)."""
        return cls(Text(text, style=style), indent=indent)

    @property
    def min_width(self) -> int:
        """The narrowest width that breaks no path segment nor word: the widest of them, on
        an indented line."""
        pieces = [len(p) for word in self.text.plain.split() for p in _pieces(word)]
        return max(pieces, default=0) + self.indent or 1

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        lines = self.text.plain.split("\n")
        widest = max(len(line.rstrip()) for line in lines) if lines else 0
        return Measurement(min(self.min_width, options.max_width), min(widest, options.max_width))

    def lines(self, width: int) -> list[Text]:
        out: list[Text] = []
        offset = 0
        for line in self.text.plain.split("\n"):
            for n, (start, end) in enumerate(_spans(line, width, self.indent)):
                piece = self.text[offset + start : offset + end]
                piece.rstrip()
                out.append(Text(" " * self.indent) + piece if n else piece)
            offset += len(line) + 1
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)  # each ends with its newline


def _as_text(cell: object) -> Text:
    if isinstance(cell, Flow):
        return cell.text
    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return Text.from_markup(cell)
    return Text(str(cell))


class FitTable(Table):
    """ckpt's table: a rule under the header and no vertical lines (narrow terminals have
    room for one more column), its title on the left. Its :class:`Flow` cells (paths) keep
    their segments whole: when its columns cannot all be wide enough for them, every row is
    shown as a record instead."""

    def __init__(self, *headers: Any, **options: Any) -> None:
        from rich import box

        options.setdefault("box", box.SIMPLE_HEAVY)
        options.setdefault("show_edge", False)
        options.setdefault("pad_edge", False)
        options.setdefault("padding", (0, 1, 0, 0))  # two spaces between columns
        options.setdefault("title_justify", "left")
        options.setdefault("title_style", "bold")
        super().__init__(*headers, **options)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        title, self.title = self.title, None
        try:
            if title:
                # At the terminal's width, not the table's (a narrow table broke it).
                text = title if isinstance(title, Text) else Text.from_markup(title)
                text.stylize(str(self.title_style or "bold"))
                yield from console.render(Flow(text), options)
            if self._fits(console, options):
                yield from super().__rich_console__(console, options)
            else:
                yield from self._records(console, options)
        finally:
            self.title = title

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        self._minimums = [self._measure_column(console, options, c).minimum for c in self.columns]
        return super()._calculate_column_widths(console, options)

    def _collapse_widths(  # type: ignore[override]
        self, widths: list[int], wrapable: list[bool], max_width: int
    ) -> list[int]:
        """Narrower columns for a narrow terminal: first each wrapable column only down to
        what its content needs (its longest word, a path's longest segment), the one with
        the most room to spare first; Rich's own way (which cuts words) only after that."""
        widths = list(widths)
        minimums = getattr(self, "_minimums", [0] * len(widths))
        excess = sum(widths) - max_width
        while excess > 0:
            spare = [
                (w - m, i)
                for i, (w, m, ok) in enumerate(zip(widths, minimums, wrapable, strict=True))
                if ok and w > m
            ]
            if not spare:
                break
            _, i = max(spare)
            widths[i] -= 1
            excess -= 1
        if excess > 0:
            return super()._collapse_widths(widths, wrapable, max_width)
        return widths

    def _fits(self, console: Console, options: ConsoleOptions) -> bool:
        if not self.columns:
            return True
        width = (self.width or options.max_width) - self._extra_width
        widths = self._calculate_column_widths(console, options.update_width(width))
        for column, got in zip(self.columns, widths, strict=True):
            need = max((c.min_width for c in column._cells if isinstance(c, Flow)), default=0)
            if need and need + self._get_padding_width(column._index) > got:
                return False
        return sum(widths) + self._extra_width <= options.max_width

    def _records(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        headers = [_as_text(c.header).plain for c in self.columns]
        pad = max((len(h) for h in headers), default=0)
        for row in range(self.row_count):
            if row:
                yield Segment.line()
            for header, column in zip(headers, self.columns, strict=True):
                value = _as_text(column._cells[row])
                if not value.plain.strip():
                    continue
                for i, part in enumerate(value.split("\n")):
                    label = Text(f"{header if i == 0 else '':<{pad}}  ", style="bold")
                    line = Flow(label + part, indent=pad + 2)
                    yield from console.render(line, options)


class Entry:
    """One item of a list: ``label  path``, the path folding under itself (or, when the
    terminal is too narrow for that, on lines of its own), then each of ``lines`` (plain
    text, or Text for styles) indented under the label."""

    def __init__(self, label: Text | str, path: str, *lines: Text | str, style: str = "") -> None:
        self.label = Text(label, style=style) if isinstance(label, str) else label
        self.path = path
        self.lines = [Text(x) if isinstance(x, str) else x for x in lines if x]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        at = self.label.cell_len + 2
        if not self.path:
            yield Flow(self.label, indent=2)
        elif not width - at < Flow.plain(self.path).min_width <= width - 2:
            # Beside the label, unless a segment fits a line of its own and not beside it.
            yield Flow(self.label + Text("  ") + Text(self.path), indent=at)
        else:
            yield self.label
            yield Flow(Text("  " + self.path), indent=2)
        for line in self.lines:
            yield Flow(Text("  ") + line, indent=2)


def entry(label: Text | str, path: str, *lines: Text | str, style: str = "") -> Entry:
    return Entry(label, path, *lines, style=style)


def field(name: str, text: str) -> Flow:
    """``Name       text``: a bold name in 11 columns, the text (plain) folding under itself."""
    return Flow(Text.assemble((f"{name:<10} ", "bold"), text), indent=11)


def labelled(label: str, style: str, text: str) -> Flow:
    """``label text`` (the label styled, the text plain: a message, paths in it), wrapped."""
    return Flow(Text.assemble((label, style), " ", text))
