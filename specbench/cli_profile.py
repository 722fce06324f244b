"""`specbench profile fit`: a scenario file from a vLLM or SGLang server's metrics, log lines or per-request responses.

Parses the options, calls ``specbench.profile_fit``, prints what it measured and writes the
scenario; nothing is written when any input is unusable (one sentence, exit 2). Then every profile
model of ``specbench.profile_models`` is fitted to the counts: a table of parameters with 95%
bootstrap intervals, GOF p-values and AIC, the best model named, optionally the fits extended to
``--extend-k`` drafts, recorded in the scenario's ``[fit.models]`` and drawn in a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape
from rich.table import Table

from specbench import acceptance
from specbench.console import console, fail, lazy_module, print_table
from specbench.errors import SpecbenchError

profile_fit = lazy_module("specbench.profile_fit")
profile_models = lazy_module("specbench.profile_models")
profile_charts = lazy_module("specbench.profile_charts")
profile_sources = lazy_module("specbench.profile_sources")
results = lazy_module("specbench.results")
scenarios = lazy_module("specbench.scenarios")


def _fit_table(fit: profile_fit.FittedProfile) -> Table:
    table = Table(title=f"measured over {fit.num_drafts:,} drafts", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in ("position", "accepted", "p_i measured", "95% interval", "p_i in the scenario"):
        table.add_column(column, justify="left" if column == "position" else "right")
    for i, measured in enumerate(fit.measured_rates):
        flag = "" if abs(fit.rates[i] - measured) < 1e-12 else " [yellow](adjusted)[/]"
        table.add_row(str(i + 1), f"{fit.counts.accepted_per_position[i]:,}", f"{measured:.4f}",
                      f"[{fit.ci_low[i]:.4f}, {fit.ci_high[i]:.4f}]", f"{fit.rates[i]:.4f}{flag}")
    return table


def _interval_text(low: float, high: float) -> str:
    return f"[{low:.4g}, {high:.4g}]"


def _models_table(comparison) -> Table:
    table = Table(title="profile models (maximum likelihood; 95% parametric-bootstrap intervals)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for column in ("model", "parameters", "G", "df", "GOF p", "AIC", "dAIC"):
        table.add_column(column, justify="left" if column in ("model", "parameters") else "right")
    best = comparison.best_fit
    for name, fit in comparison.fits.items():
        params = ", ".join(f"{key} = {value:.4g} {_interval_text(*fit.parameters_ci[key])}"
                           for key, value in fit.parameters.items())
        p_text = "-" if fit.p_value is None else f"{fit.p_value:.3g}"
        if fit.fits is False:
            p_text = f"[red]{p_text}[/]"
        table.add_row(escape(name) + (" [bold](best)[/]" if name == comparison.best else ""), escape(params),
                      f"{fit.g_statistic:.2f}", str(fit.degrees_of_freedom), p_text, f"{fit.aic:.1f}",
                      f"{fit.aic - best.aic:.1f}")
    return table


def _extension_table(comparison, extend_k: int) -> Table:
    table = Table(title=f"extended to K = {extend_k} (95% bootstrap intervals: parameter uncertainty only)",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("i", justify="right")
    extensions = {name: fit.extend(extend_k) for name, fit in comparison.fits.items()}
    for name in extensions:
        table.add_column(f"p_i {name}", justify="right")
    for i in range(extend_k):
        table.add_row(str(i + 1), *(f"{e.rates[i]:.4f} {_interval_text(*e.rates_ci[i])}" for e in extensions.values()))
    table.add_row("L", *(f"{e.mean_acceptance_length:.3f} {_interval_text(*e.mean_acceptance_length_ci)}"
                         for e in extensions.values()), style="bold")
    return table


def fit_command(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="One vLLM /metrics scrape, two (before and after: the interval between them), vLLM "
        "log files with 'SpecDecoding metrics' lines, JSON responses with per-request acceptance histograms (vLLM "
        "--per-request-spec-decode-metrics, SGLang spec_accept_histogram), SGLang logs ('Decode batch ... accept "
        "len') or one SGLang /metrics scrape.", show_default=False)],
    output: Annotated[Path, typer.Option(
        "--output", "-o", metavar="FILE", help="The scenario TOML to write.", show_default=False)],
    model: Annotated[str | None, typer.Option(
        "--model", metavar="NAME", help="The model_name label to read when a scrape holds several models.",
        show_default=False)] = None,
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME", help="The scenario's name (default: the output file's stem).",
        show_default=False)] = None,
    cost_ratio: Annotated[str | None, typer.Option(
        "--cost-ratio", "-c", metavar="C", help="Draft/target step cost ratio to record for the speed-up model.",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --output if it exists.")] = False,
    extend_k: Annotated[int | None, typer.Option(
        "--extend-k", metavar="N", help="Extend every model's fitted rates to N draft positions, with intervals.",
        show_default=False)] = None,
    figure: Annotated[Path | None, typer.Option(
        "--figure", metavar="FILE", help="The goodness-of-fit figure (PNG; default: the output's name with -fit.png).",
        show_default=False)] = None,
    use_model: Annotated[str | None, typer.Option(
        "--use-model", metavar="MODEL|best", help="Make the scenario's profile this fitted model (iid, beta-geometric, "
        "depth-decay, or best) at K = --extend-k or the measured K, instead of the measured rates.",
        show_default=False)] = None,
    bootstrap: Annotated[int | None, typer.Option(
        "--bootstrap", metavar="B", help="Parametric-bootstrap resamples for the models' intervals (default 200).",
        show_default=False)] = None,
    num_spec_tokens: Annotated[int | None, typer.Option(
        "--num-spec-tokens", "-k", metavar="K", help="Drafts per step (the server's --speculative-num-steps), for "
        "SGLang's log lines and gauges, which give the mean length only.", show_default=False)] = None,
) -> None:
    """Fit per-position acceptance rates from a vLLM or SGLang server's metrics, logs or per-request responses into a
    scenario file."""
    try:
        fitted = _fit(files, output=output, model=model, name=name, cost_ratio=cost_ratio, force=force,
                      extend_k=extend_k, use_model=use_model, bootstrap=bootstrap, num_spec_tokens=num_spec_tokens,
                      figure=figure)
    except SpecbenchError as exc:
        fail(str(exc))
    if fitted is not None:  # None: a mean length alone, whose scenario is already written and said
        _report(fitted, output, extend_k, figure)


class _Fitted(NamedTuple):
    counts: Any
    fit: Any
    comparison: Any
    skipped: str | None


def _fit(files, *, output: Path, model, name, cost_ratio, force: bool, extend_k, use_model, bootstrap: int | None,
         num_spec_tokens, figure) -> _Fitted | None:
    """Read the files, fit the profile and its models, and write the scenario; every refusal a
    ``SpecbenchError``. None when the files give a mean length alone (that scenario is written and said)."""
    if name is not None and not name.strip():
        raise SpecbenchError("--name needs a scenario name, got ''; leave it out to name the scenario after --output")
    if output.exists() and not force:
        raise SpecbenchError(f"{output} exists; pass --force to replace it or choose another --output")
    results.check_output_file("--output", output, "profile.toml", list(files))
    if figure is not None:
        _check_figure(figure)
    cost = None
    if cost_ratio is not None:
        try:
            number = float(cost_ratio)
        except ValueError:
            raise SpecbenchError(f"--cost-ratio takes a number, got {cost_ratio!r}") from None
        try:
            cost = acceptance.check_cost_ratio(number)
        except SpecbenchError:
            raise SpecbenchError(f"--cost-ratio must be a finite number >= 0, got {cost_ratio}") from None
    if extend_k is not None:
        from specbench import scenarios as scenario_module

        scenario_module.check_num_spec_tokens(extend_k)
    seen: dict[Path, Path] = {}
    for file in files:  # a log given twice would count its drafts twice, and narrow every interval
        if file.resolve() in seen:
            also = f" (also as {seen[file.resolve()]})" if seen[file.resolve()] != file else ""
            raise SpecbenchError(f"{file} is given twice{also}; give each file once")
        seen[file.resolve()] = file
    counts = profile_fit.read_counts(list(files), model)
    if isinstance(counts, profile_sources.MeanLength):
        _write_mean_only(counts, num_spec_tokens, output, name, cost,
                         {"--extend-k": extend_k, "--use-model": use_model, "--figure": figure,
                          "--bootstrap": bootstrap})
        return None
    if num_spec_tokens is not None:
        raise SpecbenchError(f"--num-spec-tokens is for SGLang's log lines and gauges, which give the mean length "
                             f"only; {counts.definition.server} gives K itself ({len(counts.accepted_per_position)})")
    fit = profile_fit.fit_profile(counts)
    if extend_k is not None and extend_k < fit.num_spec_tokens:
        raise SpecbenchError(f"--extend-k {extend_k} is below the measured K = {fit.num_spec_tokens}; give at "
                             f"least {fit.num_spec_tokens}")
    comparison, skipped = None, None
    try:
        comparison = profile_models.fit_all(counts.num_drafts, counts.accepted_per_position,
                                            num_bootstrap=profile_models.DEFAULT_BOOTSTRAP if bootstrap is None
                                            else bootstrap)
    except SpecbenchError as exc:
        if "not nested" not in str(exc):
            raise
        skipped = str(exc)
    if use_model is not None and use_model != "best":
        profile_models.get_model(use_model)
    if comparison is None:  # the options of the models have nothing to work on
        given = [f"{option} {value}" for option, value in (("--use-model", use_model), ("--extend-k", extend_k),
                                                           ("--figure", figure), ("--bootstrap", bootstrap))
                 if value is not None]
        if given:
            raise SpecbenchError(f"{given[0]}: no model could be fitted ({skipped})")
    chosen = None
    if use_model is not None:
        chosen = comparison.best if use_model == "best" else use_model
    text = profile_fit.scenario_toml(fit, name or output.stem, cost, comparison, extend_k, chosen)
    _write_scenario(text, output)
    return _Fitted(counts, fit, comparison, skipped)


def _check_figure(figure: Path) -> None:
    """Refuse a --figure that cannot be written, before the scenario is: a folder, a folder that does not exist, or a
    name whose suffix is not one of the figure's formats."""
    results.check_output_file("--figure", figure, "profile-fit.png")
    suffix = figure.suffix.lower().lstrip(".")
    if suffix not in profile_charts.FIGURE_FORMATS:
        got = f"'.{suffix}'" if suffix else "no suffix"
        raise SpecbenchError(f"--figure writes {', '.join(profile_charts.FIGURE_FORMATS)} (named by the file's "
                             f"suffix), got {figure} with {got}")


def _report(fitted: _Fitted, output: Path, extend_k, figure) -> None:
    """The fit's tables, the definition of its source's acceptance length, the models and their figure."""
    counts, fit, comparison, skipped = fitted
    print_table(_fit_table(fit))
    where = ", ".join(counts.sources) + (f" (model {counts.model})" if counts.model else "")
    console.print(f"K = {fit.num_spec_tokens}, mean acceptance length L = {fit.mean_acceptance_length:.4f}, from "
                  f"{escape(where)}" + (f", {escape(counts.span)}" if counts.span else ""), highlight=False)
    _print_definition(counts.definition)
    if counts.per_request_mean_length is not None:
        console.print(f"per request, then averaged over requests with equal weights (as SpecForge does): L = "
                      f"{counts.per_request_mean_length:.4f}; the scenario keeps the pooled {fit.mean_acceptance_length:.4f}",
                      highlight=False)
    if not fit.non_increasing:
        console.print("[yellow]note:[/] the measured rates rise with position somewhere (noise, or too few drafts); "
                      "the scenario's rates are the nearest non-increasing profile, the measured ones are kept in "
                      f"its {escape('[fit]')} table", highlight=False)
    if comparison is not None:
        print_table(_models_table(comparison))
        best = comparison.best_fit
        verdict = {True: "fits", False: "is rejected", None: "cannot be tested (as many parameters as positions)"}
        console.print(f"best model (lowest AIC): [bold]{comparison.best}[/]; it {verdict[best.fits]} at "
                      f"significance {profile_models.SIGNIFICANCE:g}" +
                      ("" if comparison.any_fits is not False else "; [yellow]no model fits[/]"), highlight=False)
        if extend_k is not None:
            print_table(_extension_table(comparison, extend_k))
        figure_path = figure or output.with_name(output.stem + "-fit.png")
        try:
            profile_charts.render_fit_chart(comparison, counts.num_drafts, counts.accepted_per_position, figure_path,
                                            extend_k)
        except OSError as exc:
            fail(f"cannot write the figure {figure_path}: {exc.strerror or exc}")
        console.print(f"figure: {escape(str(figure_path))}", highlight=False)
    else:
        console.print(f"[yellow]note:[/] no profile model fitted: {escape(skipped)}", highlight=False)
    console.print(f"wrote {escape(str(output))}; run it with: specbench sweep --scenario {escape(str(output))}",
                  highlight=False)


def _write_scenario(text: str, output: Path) -> None:
    # through a temporary file, checked as a sweep will read it before it replaces anything
    tmp = output.with_name(output.name + ".tmp")
    try:
        tmp.write_text(text)
        scenarios.load_scenario(tmp)
        tmp.replace(output)
    except OSError as exc:
        raise SpecbenchError(f"cannot write {output}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _print_definition(definition) -> None:
    console.print(f"acceptance length as the source defines it: {escape(definition.text())}", highlight=False)
    console.print(f"[dim]{escape(profile_sources.SPECBENCH_DEFINITION)}[/]", highlight=False)


def _write_mean_only(found, num_spec_tokens: int | None, output: Path, name: str | None, cost: float | None,
                     per_position_options: dict) -> None:
    """A source with the mean length only (SGLang's log lines or gauges): a scenario at the K the user names."""
    given = [option for option, value in per_position_options.items() if value is not None]
    if given:
        raise SpecbenchError(f"{given[0]} needs per-position counts, and {found.definition.server} gives the mean length "
                             f"only; give SGLang's per-request responses (spec_accept_histogram) for those")
    if num_spec_tokens is not None and found.num_spec_tokens not in (None, num_spec_tokens):
        raise SpecbenchError(f"--num-spec-tokens {num_spec_tokens} differs from the log's server_args "
                             f"(speculative_num_steps={found.num_spec_tokens}); drop the option or fix it")
    num_spec_tokens = num_spec_tokens or found.num_spec_tokens
    if num_spec_tokens is None:
        raise SpecbenchError(f"{found.definition.server} gives the mean length only, not K; pass --num-spec-tokens K "
                             f"(the server's --speculative-num-steps) to build a profile")
    text = profile_fit.mean_scenario_toml(found, num_spec_tokens, name or output.stem, cost)
    _write_scenario(text, output)
    rate = "" if found.accept_rate is None else f", accept rate {found.accept_rate:.3f} (as SGLang prints it)"
    console.print(f"mean acceptance length L = {found.mean_acceptance_length:.4f} from {escape(', '.join(found.sources))}"
                  f", {escape(found.span or '')}{rate}", highlight=False)
    _print_definition(found.definition)
    console.print(f"[yellow]note:[/] per-position rates are not measured by this source; the scenario holds L at "
                  f"K = {num_spec_tokens} with the geometric schedule (p_i = alpha^i), an assumption", highlight=False)
    console.print(f"wrote {escape(str(output))}; run it with: specbench sweep --scenario {escape(str(output))}",
                  highlight=False)
