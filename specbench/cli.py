"""The command line: the Typer app, built from the command modules; ``SpecbenchError`` becomes one red line.

Each ``cli_*.py`` module holds one command group's functions (parse the options, call the library,
print); this module only registers them, so imports run one way: ``cli`` -> ``cli_*`` -> ``console``.
"""

from __future__ import annotations

import sys

import typer

from specbench import cli_bench, cli_sweep
from specbench.console import print_error
from specbench.errors import SpecbenchError

app = typer.Typer(
    help="Benchmarks and acceptance simulation for the verification step of speculative decoding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("sweep")(cli_sweep.sweep_command)
app.command("kernels")(cli_bench.kernels_command)
app.command("plot")(cli_bench.plot_command)
app.command("env")(cli_bench.env_command)


def main() -> None:
    try:
        app()
    except SpecbenchError as exc:
        print_error(str(exc))
        sys.exit(2)
