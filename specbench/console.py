"""What every command module shares: the consoles, the one-red-line error exit, how a run stops.

The command modules (``cli_*.py``) import from here; ``cli.py`` builds the Typer app from them.
Nothing here imports torch, so ``specbench --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.errors import SpecbenchError

TABLE_FORMATS: tuple[str, ...] = ("rich", "plain", "markdown")
# Without a terminal (a CI log, a file, a pipe) rich would wrap everything at 80 columns, cutting
# profile names and folding table headers: lines there are as long as their content.
PIPED_WIDTH = 1000


class _Console(Console):
    """A rich console on which a closed pipe raises ``BrokenPipeError``, for the command to catch (see
    ``STOPPED``); rich's own default ends the program there with status 1, which reads as a finding."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def _console(stderr: bool = False) -> Console:
    on_terminal = Console(stderr=stderr).is_terminal
    return _Console(stderr=stderr) if on_terminal else _Console(stderr=stderr, width=PIPED_WIDTH)


console = _console()
error_console = _console(stderr=True)
_table_format = "rich"


def set_table_format(name: str) -> None:
    """How ``print_table`` renders: ``rich`` (boxes, colours), ``plain`` or ``markdown``."""
    global _table_format
    if name not in TABLE_FORMATS:
        raise SpecbenchError(f"--format must be one of {', '.join(TABLE_FORMATS)}, got {name!r}")
    _table_format = name


def print_table(table: Table, out: Console | None = None) -> None:
    """Print ``table`` in the chosen format (``--format``) on ``out`` (default: stdout)."""
    out = out or console
    if _table_format != "rich":
        table.box = box.MARKDOWN if _table_format == "markdown" else None
        table.show_edge = _table_format == "markdown"  # a markdown row starts and ends with a pipe
        out = _Console(file=out.file, width=max(out.width, PIPED_WIDTH), no_color=True, highlight=False,
                       emoji=False)
    out.print(table)


def plural(count: int, noun: str) -> str:
    """``1 case``, ``2 cases``: a count and its noun, plural but for one."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def print_notes(notes: list[str], out: Console | None = None) -> None:
    """Each of ``notes`` as a yellow ``note:`` line on ``out`` (default: stdout), never read as rich markup."""
    for note in notes:
        (out or console).print(f"[yellow]note:[/] {escape(note)}", highlight=False)


def print_error(message: str) -> None:
    """One red line on stderr: never wrapped, never read as rich markup."""
    error_console.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def fail(message: str) -> None:
    """Print one red sentence on stderr and exit with status 2."""
    print_error(message)
    raise typer.Exit(2)


def fail_after_saving(exc: Exception, save: Callable[[], None]) -> NoReturn:
    """End a run that ``exc`` stopped: ``save`` what it finished (a failing save is passed over: ``exc``
    is what is said), then one sentence and exit 2 for a ``SpecbenchError``, else ``exc`` raised on."""
    with contextlib.suppress(SpecbenchError):
        save()
    if isinstance(exc, SpecbenchError):
        fail(str(exc))
    raise exc


# What stops a run early, each with its exit status: Ctrl-C, and a reader of stdout that went away
# (`specbench sweep | head -1`: Python ignores SIGPIPE, so the next write raises BrokenPipeError).
# A command that writes results catches both, keeps what finished and marks the run interrupted.
STOPPED = (KeyboardInterrupt, BrokenPipeError)
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
PIPE_CLOSED = 141  # 128 + SIGPIPE, as `yes | head` ends


def stopped(reason: BaseException) -> int:
    """The exit status of a run stopped by ``reason`` (one of ``STOPPED``).

    After a closed pipe, stdout is pointed at /dev/null: what the run still prints while it saves
    its results goes nowhere instead of raising again, and Python's last flush cannot fail.
    """
    if not isinstance(reason, BrokenPipeError):
        return INTERRUPTED
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's captured stdout)
        pass
    return PIPE_CLOSED


class _Deferred:
    """A module imported on first attribute access (a plain import then: nothing half-loaded in sys.modules)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_module(name: str) -> ModuleType:
    """``name``, imported when an attribute is first read.

    Command modules take torch, pandas, matplotlib and the modules that use them this way, so
    building the command line (``specbench --help``) imports none of them.
    """
    if importlib.util.find_spec(name) is None:
        raise ImportError(f"no module named {name!r}")
    return _Deferred(name)  # type: ignore[return-value]
