"""PNG charts of sweep records (``kind == "sweep"``); they read records only and never re-run anything.

- ``acceptance_per_position.png``: configured vs measured unconditional (``p_i``) and
  conditional (``c_i``) rates per position, with 95% interval bars; one panel per case. Where the
  configured ``p`` and ``c`` are the same numbers (``K = 1``, or a min-variance profile), one line
  labelled ``configured p_i = c_i`` stands for both.
- ``accepted_distribution.png``: ``P(A = j)``, closed form (bars) vs measured (points with
  95% interval bars); one panel per case, its subtitle the configured and the measured ``L``. A
  model profile (beta-geometric, depth-decay) also shows the i.i.d. law of the same ``K`` and ``L``
  (dashed steps): the mean is the same, the law of ``A`` is not.
- ``expected_speedup.png``: ``S = L / (1 + K c)`` against the mean acceptance length for
  several ``K`` (each ``K`` its own colour and dash, ending in a labelled marker at ``L = K + 1``,
  so lines that lie on top of each other, as all do at ``c = 0``, stay apart), with each case's
  measured point (one marker shape per case, named in the panel's legend); one panel per cost ratio
  ``c`` among the cases, all on one y scale.

Figures with more than ``PANELS_PER_FIGURE`` cases continue in ``NAME-2.png``, ``NAME-3.png``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure  # no pyplot: the Agg canvas, no global state, no display

from specbench import acceptance

PANELS_PER_FIGURE = 12
_SPEEDUP_KS = (1, 2, 3, 5, 7)
_CONFIGURED = "#4c72b0"
_MEASURED = "#dd8452"
_CONDITIONAL = "#55a868"
_BOTH = "#2f8f8a"  # between the two above: one line standing for p and c
_DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)))
_CASE_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "h", "<", ">", "p")


def render_sweep_charts(records: Sequence[dict], out_dir: str | Path) -> list[Path]:
    """Draw the sweep charts of ``records`` (other kinds are ignored) into ``out_dir``.

    Returns the paths written, in order (empty when no record is a sweep record).
    """
    sweeps = [r for r in records if r.get("kind") == "sweep"]
    if not sweeps:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for page, start in enumerate(range(0, len(sweeps), PANELS_PER_FIGURE)):
        cases = sweeps[start:start + PANELS_PER_FIGURE]
        suffix = "" if page == 0 else f"-{page + 1}"
        paths.append(_paneled(cases, _draw_rates, out_dir / f"acceptance_per_position{suffix}.png",
                              "Per-position acceptance, configured vs measured (95% intervals)"))
        paths.append(_paneled(cases, _draw_distribution, out_dir / f"accepted_distribution{suffix}.png",
                              "Drafts accepted per step P(A = j), closed form vs measured (95% intervals)"))
    paths.append(_speedup_chart(sweeps, out_dir / "expected_speedup.png"))
    return paths


def _title(record: dict) -> str:
    if "tree_shape" in record:  # a tree case: N nodes, its depth families run over 1..D
        return f"{record['profile']}  (N={record['num_tree_nodes']}, depth {record['tree_depth']})"
    return f"{record['profile']}  (K={record['num_spec_tokens']})"


def _error_bars(values: list, lows: list, highs: list) -> tuple[list, list, list]:
    # intervals as (below, above) distances; missing measurements (no trials) are dropped
    kept = [(i, v, lo, hi) for i, (v, lo, hi) in enumerate(zip(values, lows, highs)) if v is not None]
    return ([i for i, *_ in kept], [v for _, v, *_ in kept],
            [[v - lo for _, v, lo, _ in kept], [hi - v for _, v, _, hi in kept]])


def _panels(count: int, width: float, height: float) -> tuple[Figure, list]:
    # up to three panels a row of width x height inches; the grid's unused cells hidden
    cols = min(3, count)
    rows = math.ceil(count / cols)
    fig = Figure(figsize=(max(6.4, width * cols), height * rows + 0.6), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes[:count]


def _paneled(cases: list[dict], draw, path: Path, title: str) -> Path:
    fig, axes = _panels(len(cases), 4.6, 3.4)
    for ax, record in zip(axes, cases):
        draw(ax, record)
    # one legend for the figure, holding every entry any panel drew (each label once)
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=min(len(entries), 5),
               fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    return path


def _draw_rates(ax, record: dict) -> None:
    k = len(record["configured_rates"])  # K, or a tree's depth
    positions = list(range(1, k + 1))
    configured, conditional = record["configured_rates"], record["configured_conditional_rates"]
    if all(math.isclose(p, c, abs_tol=1e-12) for p, c in zip(configured, conditional)):
        # the same numbers: one line, or a second one would hide exactly under it
        ax.plot(positions, configured, "D-", color=_BOTH, label="configured p_i = c_i", mfc="none")
    else:
        ax.plot(positions, configured, "s-", color=_CONFIGURED, label="configured p_i", mfc="none")
        ax.plot(positions, conditional, "^--", color=_CONDITIONAL, label="configured c_i", mfc="none")
    for name, color, label, shift in (("rates", _MEASURED, "measured p_i", 0.0),
                                      ("conditional_rates", "#8172b2", "measured c_i", 0.08)):
        index, values, bars = _error_bars(record[f"measured_{name}"], record[f"measured_{name}_ci_low"],
                                          record[f"measured_{name}_ci_high"])
        ax.errorbar([positions[i] + shift for i in index], values, yerr=bars, fmt="o", ms=3.5, capsize=3,
                    color=color, label=label)
    ax.set_xticks(positions)
    ax.set_xlim(0.5, k + 0.5)  # room for the shifted c_i points, even at K = 1
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("draft position i")
    ax.set_ylabel("acceptance rate")
    ax.set_title(_title(record), fontsize=9)
    ax.grid(alpha=0.3)


def _draw_distribution(ax, record: dict) -> None:
    k = len(record["configured_rates"])  # K, or a tree's depth
    counts = list(range(k + 1))
    ax.bar(counts, record["expected_accepted_distribution"], color=_CONFIGURED, alpha=0.45, label="closed form")
    index, values, bars = _error_bars(record["measured_accepted_distribution"],
                                      record["measured_accepted_distribution_ci_low"],
                                      record["measured_accepted_distribution_ci_high"])
    ax.errorbar([counts[i] for i in index], values, yerr=bars, fmt="o", ms=3.5, capsize=3, color=_MEASURED,
                label="measured")
    iid_law = record.get("iid_same_length_distribution")
    if iid_law is not None:  # a model profile: the i.i.d. law of A with the same K and L, for contrast
        ax.step(counts, iid_law, where="mid", color="#555555", ls="--", lw=1.2, label="i.i.d., same L")
    ax.set_xticks(counts)
    ax.set_xlabel("drafts accepted A")
    ax.set_ylabel("P(A = j)")
    ax.set_title(f"{_title(record)}\nL configured {record['expected_acceptance_length']:.3f}, "
                 f"measured {record['mean_acceptance_length']:.3f}", fontsize=9)
    ax.grid(alpha=0.3, axis="y")


def _speedup_chart(records: list[dict], path: Path) -> Path:
    _speedup_figure(records).savefig(path, dpi=110)
    return path


def _speedup_figure(records: list[dict]) -> Figure:
    # one panel per cost ratio, so that every case sits on the curves of its own c
    cost_ratios = list(dict.fromkeys(r["cost_ratio"] for r in records))
    fig, axes = _panels(len(cost_ratios), 5.6, 4.8)
    # a tree case is a point (its L / (1 + N c)), not a curve: its N would stretch the axis to N + 1
    ks = sorted(set(_SPEEDUP_KS) | {r["num_spec_tokens"] for r in records if "tree_shape" not in r})
    styles = {k: (f"C{i % 10}", _DASHES[i % len(_DASHES)]) for i, k in enumerate(ks)}
    top = 0.0
    for ax, cost_ratio in zip(axes, cost_ratios):
        # widest first: where lines coincide (c = 0: S = L for every K) each shows as a band around the next
        for rank, k in enumerate(reversed(ks)):
            color, dash = styles[k]
            lengths = [1 + (k * step) / 100 for step in range(101)]
            speedups = [acceptance.expected_speedup(length, k, cost_ratio) for length in lengths]
            top = max(top, speedups[-1])
            ax.plot(lengths, speedups, color=color, ls=dash, lw=1.3 + 0.7 * (len(ks) - 1 - rank), alpha=0.85,
                    label=f"K={k}", zorder=1 + rank)
            ax.plot(lengths[-1], speedups[-1], "|", color=color, ms=12, mew=2, zorder=10)
            # above the line's end: every line rises to the right, so this spot is clear of it
            ax.annotate(f"K={k}", (lengths[-1], speedups[-1]), xytext=(-3, 5), textcoords="offset points",
                        fontsize=7, color=color, ha="right", va="bottom")
        cases = [r for r in records if r["cost_ratio"] == cost_ratio]
        for number, record in enumerate(cases):
            ax.plot(record["mean_acceptance_length"], record["measured_speedup"],
                    _CASE_MARKERS[number % len(_CASE_MARKERS)],
                    color="white" if "tree_shape" in record else styles[record["num_spec_tokens"]][0],
                    mec="black", ms=7, zorder=20, ls="none",
                    label=_title(record) if "tree_shape" in record else
                    f"{record['profile']} (K={record['num_spec_tokens']})")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("mean acceptance length L (tokens per target step)")
        ax.set_ylabel("expected speed-up S = L / (1 + K c)")
        ax.set_title(f"c = {cost_ratio:g}")
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        measured = [(h, lab) for h, lab in zip(handles, labels) if not lab.startswith("K=")]
        ax.legend([h for h, _ in measured], [lab for _, lab in measured], title="measured cases", fontsize=7,
                  title_fontsize=7, loc="upper left")
    for ax in axes:  # one y scale, so panels compare at a glance
        ax.set_ylim(0, top * 1.05)
    # two lines: on one, the title outruns a one-panel figure and loses both ends
    fig.suptitle("Expected speed-up over plain decoding (lines: the model for each K)\n"
                 "c = draft step cost / target step cost")
    return fig
