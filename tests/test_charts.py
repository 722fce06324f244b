"""Every chart the commands draw is readable: its text fits inside the figure, every axis has tick labels.

The check runs inside ``Figure.savefig`` (patched for these tests), so it sees the figure exactly
as ``sweep``, ``kernels``, ``plot`` and ``compare`` save it, laid out by its own layout engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator
from typer.testing import CliRunner

from specbench import sweep
from specbench.bench import describe_record
from specbench.bench_charts import render_kernel_charts
from specbench.cli import app
from specbench.compare import CaseComparison, Comparison
from specbench.compare_charts import comparison_chart
from specbench.scenarios import make_profile
from specbench.sweep_charts import render_sweep_charts

SLACK_PX = 1.0  # antialiasing: a glyph may touch the edge by a pixel


def _outside(extent, figure_box) -> bool:
    return (extent.x0 < figure_box.x0 - SLACK_PX or extent.y0 < figure_box.y0 - SLACK_PX
            or extent.x1 > figure_box.x1 + SLACK_PX or extent.y1 > figure_box.y1 + SLACK_PX)


def _shown(text: Text) -> bool:
    return text.get_visible() and (text.axes is None or text.axes.get_visible())


def _tick_labels(axis) -> list[str]:
    """The non-empty labels of the ticks the axis draws (major and minor, inside its view)."""
    low, high = sorted(axis.get_view_interval())
    labels = []
    for locs, formatter in ((axis.get_majorticklocs(), axis.get_major_formatter()),
                            (axis.get_minorticklocs(), axis.get_minor_formatter())):
        inside = [loc for loc in locs if low - 1e-9 * abs(low) <= loc <= high + 1e-9 * abs(high)]
        labels += [label for label in formatter.format_ticks(inside) if label.strip()]
    return labels


def readability_problems(fig: Figure, dpi: float | None = None) -> list[str]:
    """What a reader would miss in ``fig`` drawn at ``dpi``: text cut by the figure's edge, axes without tick labels."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    saved_dpi = fig.dpi
    fig.set_dpi(dpi or saved_dpi)
    try:
        canvas.draw()  # runs the layout engine, as savefig does
        return _problems(fig, canvas.get_renderer())
    finally:
        fig.set_dpi(saved_dpi)


def _problems(fig: Figure, renderer) -> list[str]:
    box = fig.bbox
    problems = []
    tick_texts = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_texts.update((id(tick.label1), id(tick.label2)))
    for text in fig.findobj(Text):
        if id(text) in tick_texts or not text.get_text().strip() or not _shown(text):
            continue
        if _outside(text.get_window_extent(renderer), box):
            problems.append(f"text cut by the figure's edge: {text.get_text()!r}")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            where = f"{name} axis of {ax.get_title() or ax.get_ylabel() or 'a panel'!r}"
            extent = axis.get_tightbbox(renderer)
            if extent is not None and _outside(extent, box):
                problems.append(f"tick labels or label of the {where} cut by the figure's edge")
            if not axis.get_visible() or not axis.get_ticks_position() or _is_blank(axis):
                continue
            labels = _tick_labels(axis)
            # one label on a log axis does not give its scale, unless the ticks were put at the data (the
            # batch sizes of a panel with one batch size)
            automatic = not isinstance(axis.get_major_locator(), FixedLocator)
            needed = 2 if axis.get_scale() == "log" and automatic else 1
            if len(labels) < needed:
                problems.append(f"the {where} ({axis.get_scale()}) shows {len(labels)} tick label(s): {labels}")
    return problems


def _is_blank(axis) -> bool:
    # an axis drawn without ticks on purpose (set_ticks([])) has nothing to label
    return len(axis.get_majorticklocs()) == 0 and len(axis.get_minorticklocs()) == 0


@pytest.fixture
def checked_charts(monkeypatch):
    """Patch ``Figure.savefig`` to collect each saved chart's readability problems; return them by file name."""
    found: dict[str, list[str]] = {}
    save = Figure.savefig

    def checked_savefig(self, fname, *args, **kwargs):
        # a path, or a buffer (compare draws its chart in memory first)
        name = Path(fname).name if isinstance(fname, (str, Path)) else f"in-memory {len(found)}"
        found[name] = readability_problems(self, kwargs.get("dpi"))
        return save(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", checked_savefig)
    return found


def _assert_readable(found: dict[str, list[str]], expected: int) -> None:
    assert len(found) == expected, sorted(found)
    bad = [f"{name}: {problem}" for name, problems in sorted(found.items()) for problem in problems]
    assert not bad, "\n".join(bad)


def _sweep(profiles, **keywords) -> list[dict]:
    return sweep.run_sweep(profiles, num_requests=2000, backend="torch", device="cpu", **keywords)


def test_the_readme_first_sweep_charts_are_readable(checked_charts, tmp_path):
    # specbench sweep --acceptance-length 2.5
    render_sweep_charts(_sweep([make_profile(3, acceptance_length=2.5)]), tmp_path)
    _assert_readable(checked_charts, 3)


def test_sweep_charts_of_many_cases_and_cost_ratios_are_readable(checked_charts, tmp_path):
    profiles = [make_profile(k, acceptance_length=length, schedule=schedule)
                for k in (1, 3, 7) for length in (1.5, 2.0) for schedule in ("min-variance", "geometric")]
    profiles.append(make_profile(4, rates=[0.9, 0.7, 0.5, 0.3], name="a scenario with a rather long name (vLLM)"))
    records = _sweep(profiles[:7], cost_ratio=0.05) + _sweep(profiles[7:], cost_ratio=0.2)
    render_sweep_charts(records, tmp_path)
    _assert_readable(checked_charts, 5)  # 13 cases: two pages of panels, one speed-up chart


def _kernels_record(mode: str, draft: str, batch: int, median: float, impl: str = "torch", graph: bool = False,
                    k: int = 3, vocab: int = 4096, acceptance: str = "3") -> dict:
    return {
        "kind": "kernels", "status": "ok", "mode": mode, "draft": draft, "impl": impl, "batch_size": batch,
        "num_spec_tokens": k, "vocab_size": vocab, "dtype": "float32", "acceptance": acceptance,
        "acceptance_length": 3.0, "cuda_graph": graph, "median_us": median, "p20_us": 0.9 * median,
        "p80_us": 1.3 * median, "tokens_per_s": 3 * batch / (median * 1e-6),
        "speedup_vs_torch": None if impl == "torch" else 1.0,
    }


_VARIANTS = (("greedy", "none"), ("probabilistic", "logits"), ("probabilistic", "probs"),
             ("probabilistic", "none"), ("synthetic", "none"))


def test_kernels_quick_charts_on_a_cpu_are_readable(checked_charts, tmp_path):
    # what `kernels --quick` times on a CPU: torch, K=3, V=4096, B=1 and 8; times within a decade
    records = [_kernels_record(mode, draft, batch, median)
               for mode, draft in _VARIANTS for batch, median in ((1, 490.0 + 600 * (draft == "logits")), (8, 640.0))]
    render_kernel_charts(records, tmp_path)
    _assert_readable(checked_charts, 2)


def test_kernels_charts_with_several_implementations_and_shapes_are_readable(checked_charts, tmp_path):
    records = []
    for impl, factor in (("torch", 1.0), ("triton-sequential-4096x16", 0.05), ("examples/my_sampler.py:my_sampler", 0.9)):
        for mode, draft in _VARIANTS[:2]:
            for k, vocab in ((3, 128256), (7, 151936)):
                for batch in (1, 64, 256):
                    for graph in (False, True) if impl.startswith("triton") else (False,):
                        record = _kernels_record(mode, draft, batch, 300.0 * factor * batch ** 0.8, impl, graph,
                                                 k, vocab)
                        if impl != "torch":
                            record["speedup_vs_torch"] = 1 / factor
                        records.append(record)
    render_kernel_charts(records, tmp_path)
    _assert_readable(checked_charts, 2 + 3)  # time and throughput; a heatmap per implementation and graph


def test_kernels_charts_of_a_flat_line_and_a_near_1x_speedup_are_readable(checked_charts, tmp_path):
    records = [_kernels_record("greedy", "none", batch, 5.0, impl) for impl in ("torch", "triton") for batch in (1, 2)]
    for record in records:
        record["speedup_vs_torch"] = 1.0 if record["impl"] == "torch" else 1.02
    render_kernel_charts(records, tmp_path)
    _assert_readable(checked_charts, 3)


def test_compare_chart_of_the_committed_gpu_baseline_is_readable(checked_charts, tmp_path):
    baseline = Path(__file__).parent.parent / "results" / "baselines" / "h100-quick"
    result = CliRunner().invoke(app, ["compare", str(baseline), str(baseline), "--chart", str(tmp_path / "report.png")])
    assert result.exit_code == 0, result.output
    _assert_readable(checked_charts, 1)


def test_compare_chart_of_a_plugin_is_readable(checked_charts, tmp_path):
    # the README's own plugin, timed as `kernels --impl torch,examples/my_sampler.py:my_sampler` does
    record = _kernels_record("probabilistic", "logits", 256, 100.0, "examples/my_sampler.py:my_sampler", True, 7, 151936)
    record.update(converted=["target logits -> probs", "draft logits -> probs"], conversion="outside")
    cases = [CaseComparison(case=f"{record['impl']}: {describe_record({**record, 'batch_size': batch})}",
                            kind="kernels", verdict=verdict, ratio=ratio, ci_low=ratio - 0.02, ci_high=ratio + 0.03,
                            threshold=0.05)
             for batch, verdict, ratio in ((1, "slower", 1.3), (64, "unchanged", 1.0), (256, "inconclusive", 1.04),
                                           (512, "faster", 0.8))]
    comparison = Comparison(kind="kernels", cases=cases, baseline_metadata={}, current_metadata={})
    (tmp_path / "report.png").write_bytes(comparison_chart(comparison))
    _assert_readable(checked_charts, 1)
