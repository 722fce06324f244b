"""The command line: parse, call the library, print. ``SpecbenchError`` becomes one red line."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from specbench.errors import SpecbenchError

app = typer.Typer(
    help="Benchmarks and acceptance simulation for the verification step of speculative decoding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
error_console = Console(stderr=True)


def print_error(message: str) -> None:
    """One red line on stderr: never wrapped, never read as rich markup."""
    error_console.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def fail(message: str) -> None:
    """Print one red sentence on stderr and exit with status 2."""
    print_error(message)
    raise typer.Exit(2)


# The commands live in their own modules and register themselves on `app`.
from specbench import cli_bench, cli_sweep  # noqa: F401


def main() -> None:
    try:
        app()
    except SpecbenchError as exc:
        print_error(str(exc))
        sys.exit(2)
