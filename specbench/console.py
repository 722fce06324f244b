"""What every command module shares: the consoles and the one-red-line error exit.

The command modules (``cli_*.py``) import from here; ``cli.py`` builds the Typer app from them.
Nothing here imports torch, so ``specbench --help`` stays fast.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
error_console = Console(stderr=True)


def print_error(message: str) -> None:
    """One red line on stderr: never wrapped, never read as rich markup."""
    error_console.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def fail(message: str) -> None:
    """Print one red sentence on stderr and exit with status 2."""
    print_error(message)
    raise typer.Exit(2)
