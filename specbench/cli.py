"""The command line: the Typer app, built from the command modules; ``SpecbenchError`` becomes one red line.

Each ``cli_*.py`` module holds one command group's functions (parse the options, call the library,
print); this module only registers them, so imports run one way: ``cli`` -> ``cli_*`` -> ``console``.

Exit status, for every command: 0 done; 1 a finding (a sweep ``BUG``, a kernel ``FAIL``, a slower
case in ``compare``, a failed ``verify`` check); 2 a usage error or input that cannot be used (one
red sentence on stderr, the command line's own usage errors included); 70 a specbench bug (an
unexpected exception: one line naming it, the traceback in a file; sysexits' EX_SOFTWARE); 130
interrupted by Ctrl-C; 141 output cut short by a closed pipe (``specbench sweep | head``), as a
shell reports SIGPIPE. An interrupted or cut-short run keeps its finished results on disk, marked
interrupted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from specbench import (
    __version__,
    cli_bench,
    cli_compare,
    cli_export,
    cli_merge,
    cli_plan,
    cli_profile,
    cli_sweep,
    cli_verify,
    console,
)
from specbench.errors import SpecbenchError

try:  # typer >= 0.24 carries its own copy of click
    from typer._click.core import ParameterSource
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover -- older typer, on click itself
    from click.core import ParameterSource
    from click.exceptions import ClickException, UsageError

EXIT_BUG = 70
EXIT_CODES = ("Exit status: 0 done, 1 a finding (BUG, FAIL, slower, failed check), 2 usage error, 70 a specbench "
              "bug, 130 interrupted, 141 closed pipe.")

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
    ctx: typer.Context,
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
        if ctx.get_parameter_source("output_format") is ParameterSource.ENVIRONMENT:
            # the value came from the environment, not the command line: name the variable to fix
            console.fail(f"SPECBENCH_FORMAT (the environment's --format) must be one of "
                         f"{', '.join(console.TABLE_FORMATS)}, got {output_format!r}; fix or unset it")
        console.fail(str(exc))


for name, command in (("sweep", cli_sweep.sweep_command), ("kernels", cli_bench.kernels_command),
                      ("plot", cli_bench.plot_command), ("env", cli_bench.env_command),
                      ("plan", cli_plan.plan_command),
                      ("compare", cli_compare.compare_command), ("calibrate", cli_compare.calibrate_command),
                      ("export", cli_export.export_command), ("merge", cli_merge.merge_command),
                      ("verify", cli_verify.verify_command)):
    app.command(name, epilog=EXIT_CODES)(command)

profile_app = typer.Typer(help="Acceptance profiles from real servers.", no_args_is_help=True, add_completion=False)
profile_app.command("fit", epilog=EXIT_CODES)(cli_profile.fit_command)
app.add_typer(profile_app, name="profile")


def main() -> None:
    """The ``specbench`` program: run the command line, exit with the status of the module docstring."""
    sys.exit(run())


def run(args: Sequence[str] | None = None) -> int:
    """Run the command line on ``args`` (default ``sys.argv[1:]``) and return its exit status.

    Typer runs outside its standalone mode, so every way out comes back here and gets its status:
    nothing escapes as a traceback with status 1, which a pipeline would read as a finding.
    """
    try:
        command = typer.main.get_command(app)
        _refuse_repeated_options(command, list(sys.argv[1:] if args is None else args))
        status = command.main(args, prog_name="specbench", standalone_mode=False)
    except SpecbenchError as exc:
        console.print_error(str(exc))
        return 2
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `specbench` alone: Typer has printed the help
            return exc.exit_code
        where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
        console.print_error(exc.format_message().rstrip(".") + where)
        return exc.exit_code
    except ClickException as exc:
        console.print_error(exc.format_message())
        return exc.exit_code
    except console.STOPPED as exc:  # outside a command's own handling (Typer turns Ctrl-C in one into 130)
        return console.stopped(exc)
    except SystemExit as exc:
        # Typer ends a write to a closed pipe with sys.exit(1), which would read as a finding; specbench
        # itself leaves by typer.Exit, so any other sys.exit came from code it called (a plugin)
        if isinstance(exc.__context__, BrokenPipeError):
            return console.stopped(exc.__context__)
        return _report_bug(exc)
    except Exception as exc:  # noqa: BLE001 -- anything else is a bug of ours: its own status, never 0, 1 or 2
        return _report_bug(exc)
    return status if isinstance(status, int) else 0


def _refuse_repeated_options(group, args: list[str]) -> None:
    """A ``SpecbenchError`` for an option that takes one value given twice on the command line (Click keeps the
    last one silently, so `--top-k 5 --top-k 6` would time top_k 6 alone); options that take a list (``--impl``,
    sweep's ``--tree``) add their repeats, and are left alone. Each command's options are looked for between its
    name and the next (sub)command's."""
    if "--" in args:
        args = args[:args.index("--")]
    command, rest = group, args
    while True:
        named = None
        if hasattr(command, "commands"):
            named = next((i for i, arg in enumerate(rest) if arg in command.commands), None)
        _refuse_repeats_of(command, rest if named is None else rest[:named])
        if named is None:
            return
        command, rest = command.commands[rest[named]], rest[named + 1:]


def _refuse_repeats_of(command, args: list[str]) -> None:
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or param.multiple or getattr(param, "count", False):
            continue
        names = [*param.opts, *param.secondary_opts]
        given = [arg for arg in args if arg in names or any(arg.startswith(f"{name}=") for name in names
                                                            if name.startswith("--"))]
        if len(given) > 1:
            shown = "/".join(names) if param.secondary_opts else " / ".join(names)
            # a flag takes no value: said so, and an on/off pair is one setting given twice
            takes = ("it is one on/off setting" if param.secondary_opts else "it is a flag (it takes no value)") \
                if getattr(param, "is_flag", False) else "it takes one value"
            raise SpecbenchError(f"{shown} was given {len(given)} times ({', '.join(given)}); {takes}, so give it "
                                 f"once")


def _report_bug(exc: BaseException) -> int:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        handle, path = tempfile.mkstemp(prefix="specbench-bug-", suffix=".txt")
        with os.fdopen(handle, "w") as file:
            file.write(f"specbench {__version__}: {' '.join(sys.argv)}\n\n{text}")
        where = f"traceback in {path}"
    except OSError:
        sys.stderr.write(text)
        where = "traceback above"
    message = (str(exc).splitlines() or [""])[0][:300]
    name = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    console.print_error(f"this is a specbench bug, please report it: {name} ({where})")
    return EXIT_BUG
