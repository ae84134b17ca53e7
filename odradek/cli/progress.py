"""Progress bars of the long commands (``perf``, ``reassign-partitions --wait``, ``mirror``,
``dump-log``), drawn with rich on standard error, and only when it is a terminal.

Kafka's tools draw no progress, and scripts read these commands' output, so the rules are:
- the bar goes to standard error, never into standard output;
- it is drawn only on a terminal: with standard error a pipe or a file (tests, CI, logs)
  nothing at all is written, and the output is byte for byte what it was without bars;
- lines the command prints to standard output while the bar runs go above the bar only
  when standard output is the terminal too; when it is a pipe they go to the pipe as they
  are (rich would otherwise send them through its console, onto standard error);
- ``--no-progress`` turns it off on a terminal too (``add_no_progress``);
- the bar is transient: it disappears when the work is done.

Whether standard error is a terminal is asked of the file itself (``isatty``), not of
rich's environment variables (``FORCE_COLOR``, ``TTY_COMPATIBLE``), so a CI that forces
colour still gets plain output. Tests draw a bar by replacing ``stderr_console`` with a
function returning ``Console(force_terminal=True, file=StringIO())``.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = ["add_no_progress", "stderr_console", "count_bar", "bytes_bar"]


def add_no_progress(parser) -> None:
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar on a terminal (none is drawn when standard error is not one)")


def stderr_console() -> Console:
    """The console bars are drawn on: standard error, a terminal only if ``isatty`` says so."""
    file = sys.stderr
    is_tty = hasattr(file, "isatty") and file.isatty()
    return Console(file=file, force_terminal=is_tty, highlight=False)


def _bar(columns: list, enabled: bool) -> Progress:
    console = stderr_console()
    stdout_tty = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
    return Progress(*columns, console=console, transient=True, disable=not (enabled and console.is_terminal),
                    redirect_stdout=stdout_tty, redirect_stderr=True)


def count_bar(what: str, unit: str = "records", enabled: bool = True) -> Progress:
    """A bar of things done of a total (``task.total``; None: unknown, the bar pulses), with
    a free text field ``note`` (``add_task(..., note="")``) for a rate or a detail."""
    return _bar([TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                 TextColumn("{task.fields[note]}"), TimeElapsedColumn()], enabled)


def bytes_bar(enabled: bool = True) -> Progress:
    """Bars of bytes read of a file's size, with the speed and the time left; one task per
    file, whose description (``add_task("reading 0000.log", total=size)``) heads its line."""
    return _bar([TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                 TimeRemainingColumn()], enabled)
