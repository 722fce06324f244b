"""The command line: the Typer app, built from the command modules; ``SpecbenchError`` becomes one red line.

Each ``cli_*.py`` module holds one command group's functions (parse the options, call the library,
print); this module only registers them, so imports run one way: ``cli`` -> ``cli_*`` -> ``console``.

Exit status, for every command: 0 done; 1 a finding (a sweep ``BUG``, a kernel ``FAIL``, a slower
case in ``compare``, a failed ``verify`` check); 2 a usage error or input that cannot be used (one
red sentence on stderr); 130 interrupted (Ctrl-C; finished results stay on disk). Output cut short
by a closed pipe (``specbench sweep | head``) ends quietly with 141, as a shell reports SIGPIPE.
"""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from specbench import __version__, cli_bench, cli_compare, cli_profile, cli_sweep, cli_verify, console
from specbench.errors import SpecbenchError

EXIT_CODES = "Exit status: 0 done, 1 a finding (BUG, FAIL, slower, failed check), 2 usage error, 130 interrupted."

app = typer.Typer(
    help="Benchmarks and acceptance simulation for the verification step of speculative decoding.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_flags_as_flags() -> None:
    # Typer 0.2x prints a flag's type (`--no-charts <bool>`) as if it took a value; a flag takes none
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_as_flags", False):
        return

    def display_type_rich(self, ctx):
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.flags_as_flags = True
    option.display_type_rich = display_type_rich


_show_flags_as_flags()


def _print_version(value: bool) -> None:
    if value:
        console.console.print(f"specbench {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", help="Print specbench's version and exit.", callback=_print_version, is_eager=True)] = False,
    output_format: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", help="Tables as rich (boxes and colours; full width when piped), plain (no "
        "boxes or colours) or markdown (pipe tables).", envvar="SPECBENCH_FORMAT")] = "rich",
) -> None:
    """Benchmarks and acceptance simulation for the verification step of speculative decoding."""
    try:
        console.set_table_format(output_format)
    except SpecbenchError as exc:
        console.fail(str(exc))


for name, command in (("sweep", cli_sweep.sweep_command), ("kernels", cli_bench.kernels_command),
                      ("plot", cli_bench.plot_command), ("env", cli_bench.env_command),
                      ("compare", cli_compare.compare_command), ("verify", cli_verify.verify_command)):
    app.command(name, epilog=EXIT_CODES)(command)

profile_app = typer.Typer(help="Acceptance profiles from real servers.", no_args_is_help=True, add_completion=False)
profile_app.command("fit", epilog=EXIT_CODES)(cli_profile.fit_command)
app.add_typer(profile_app, name="profile")


def main() -> None:
    if hasattr(signal, "SIGPIPE"):
        # a reader that goes away (`specbench sweep | head`) ends the program as it ends `cat`: by
        # SIGPIPE, status 141, no traceback (Python's default turns it into an error, status 1)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        app()
    except SpecbenchError as exc:
        console.print_error(str(exc))
        sys.exit(2)
