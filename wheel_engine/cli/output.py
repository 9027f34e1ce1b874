"""How the CLI talks: rich tables on a terminal, JSON for scripts, one clear line for errors.

Every command builds plain data (dicts, lists, numbers, strings) and hands it to an
:class:`Output`; the same data is either printed as JSON (``--json``) or rendered for people.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TextIO

from wheel_engine.errors import WheelEngineError

if TYPE_CHECKING:  # rich is imported when something is drawn: --json and errors never need it
    from rich.console import Console
    from rich.progress import Progress

__all__ = [
    "EXIT_ERROR",
    "EXIT_LOCKED",
    "EXIT_OK",
    "EXIT_PROBLEM",
    "CliError",
    "Output",
    "fmt_age",
    "fmt_bytes",
    "fmt_duration",
    "fmt_json",
    "fmt_time",
]

EXIT_OK = 0
EXIT_PROBLEM = 1  #: the command ran and found a problem (check failed, nothing to redrive...)
EXIT_USAGE = 2  #: argparse's own code for bad arguments
EXIT_ERROR = 3  #: the command could not run: missing file, not a journal, damaged journal
EXIT_LOCKED = 4  #: a writing command found the journal locked by a running engine

#: A Python exception's class name where a message starts or follows "path: " (``ValueError: ``):
#: internal detail that tells a person nothing; ``--debug`` shows the traceback for developers.
_EXCEPTION_NAME: Final = re.compile(r"(?:(?<=^)|(?<=: ))[A-Z][A-Za-z]*(?:Error|Exception): ")


class CliError(WheelEngineError):
    """An error the user can act on: printed as one line, no traceback."""

    def __init__(self, message: str, *, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def fmt_time(epoch: float | None) -> str:
    """Epoch seconds as a UTC ISO timestamp with milliseconds, or ``-``."""
    if epoch is None:
        return "-"
    try:
        stamp = dt.datetime.fromtimestamp(epoch, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return repr(epoch)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fmt_duration(seconds: float) -> str:
    """A duration for people: ``850ms``, ``12.3s``, ``4m05s``, ``3h12m``, ``2d04h``."""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 1:
        return f"{sign}{s * 1000:.0f}ms"
    if s < 60:
        return f"{sign}{s:.1f}s"
    if s < 3600:
        return f"{sign}{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{sign}{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{sign}{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


def fmt_age(epoch: float, now: float) -> str:
    """``in 5.0s`` or ``12.3s ago`` relative to ``now``."""
    delta = epoch - now
    return f"in {fmt_duration(delta)}" if delta >= 0 else f"{fmt_duration(-delta)} ago"


def fmt_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_json(value: Any) -> str:
    """A value (a payload) as compact JSON, the way people will type it back into ``--payload``."""
    return json.dumps(value, default=_jsonable, ensure_ascii=False)


def plain_message(text: str) -> str:
    """``text`` without Python exception class names (``FileExistsError: ...``)."""
    return _EXCEPTION_NAME.sub("", text)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


class Output:
    """Where a command's results go. ``json=True``: one JSON document on stdout, nothing else."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self._stdout = stdout if stdout is not None else sys.stdout
        self._stderr = stderr if stderr is not None else sys.stderr
        self._console: Console | None = None
        self._err_console: Console | None = None

    @property
    def console(self) -> Console:
        """The rich console on stdout, made (and rich imported) on first use."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._stdout, highlight=False, soft_wrap=False)
            if not self._console.is_terminal:  # a pipe or a file: do not wrap at 80 columns
                self._console.width = 160
        return self._console

    @property
    def err_console(self) -> Console:
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(file=self._stderr, highlight=False, soft_wrap=True)
        return self._err_console

    # --- results -------------------------------------------------------------------------------
    def json(self, data: Any) -> None:
        self._stdout.write(json.dumps(data, indent=2, default=_jsonable, sort_keys=False))
        self._stdout.write("\n")
        self._stdout.flush()

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        title: str | None = None,
        right: Sequence[str] = (),
        nowrap: Sequence[str] = (),
    ) -> None:
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for column in columns:
            table.add_column(
                column, justify="right" if column in right else "left", no_wrap=column in nowrap
            )
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        self.console.print(table)

    def fields(self, pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> None:
        """A two-column ``name: value`` block."""
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_header=False, show_edge=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for name, value in pairs:
            table.add_row(name, "-" if value is None else str(value))
        self.console.print(table)

    def line(self, text: str = "", *, style: str | None = None) -> None:
        if not self.json_mode:
            self.console.print(text, style=style, markup=False)

    def note(self, text: str) -> None:
        """A remark for people on stderr (kept out of the way of ``--json`` output)."""
        self._to_stderr(text, "dim")

    def error(self, text: str) -> None:
        """One line on stderr, without Python exception names."""
        self._to_stderr(f"wheel-engine: error: {plain_message(text)}", "red")

    def _to_stderr(self, line: str, style: str) -> None:
        if self._stderr.isatty():
            self.err_console.print(line, markup=False, style=style)
        else:  # plain text, and no rich import for it
            self._stderr.write(line + "\n")
            self._stderr.flush()

    # --- progress --------------------------------------------------------------------------------
    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[_Bar]:
        """A progress bar on stderr when it is a terminal; a silent counter otherwise."""
        if self.json_mode or not self._stderr.isatty():
            yield _Bar(None, None)
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        progress = Progress(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.err_console,
            transient=True,
        )
        with progress:
            task = progress.add_task(description, total=total)
            yield _Bar(progress, task)


class _Bar:
    def __init__(self, progress: Progress | None, task: Any) -> None:
        self._progress = progress
        self._task = task

    def update(self, done: int, total: int | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=total)
