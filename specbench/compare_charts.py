"""The chart of ``specbench compare --chart``: each case's ratio current/baseline with its interval."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from specbench.compare import Comparison

_COLORS = {"slower": "tab:red", "changed": "tab:red", "differs": "tab:red", "faster": "tab:green",
           "unchanged": "tab:gray", "same": "tab:gray", "inconclusive": "tab:orange"}


def comparison_chart(comparison: Comparison, fmt: str = "png") -> bytes:
    """The chart as the bytes of a ``fmt`` file (png, svg or pdf), drawn in memory so that nothing
    is written until every report is ready. One row per case, worst on top: the ratio as a dot,
    its 95% interval as a bar, the thresholds as dashed lines."""
    cases = comparison.cases
    labels = [f"{c.case}  ({c.verdict})" for c in reversed(cases)]
    # the case labels sit left of the plot, which keeps 6 inches whatever their length (7-point text:
    # about 0.055 inch a character)
    label_inches = 0.055 * max((len(label) for label in labels), default=0)
    fig, ax = plt.subplots(figsize=(max(10.0, 6.5 + label_inches), 1.4 + 0.28 * max(len(cases), 1)),
                           layout="constrained")
    for row, case in enumerate(reversed(cases)):
        if case.ratio is None:
            continue
        color = _COLORS.get(case.verdict, "black")
        if case.ci_low is not None:
            ax.plot([case.ci_low, case.ci_high], [row, row], color=color, linewidth=3, alpha=0.5)
        ax.plot([case.ratio], [row], "o", color=color)
    ax.set_yticks(range(len(cases)), labels, fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    thresholds = sorted({c.threshold for c in cases if c.threshold is not None})
    for threshold in thresholds:
        for edge in (1 - threshold, 1 + threshold):
            ax.axvline(edge, color="tab:gray", linestyle="--", linewidth=0.8)
    what = "median time" if comparison.kind == "kernels" else "mean acceptance length"
    ax.set_xlabel(f"current / baseline {what} (dot), 95% bootstrap interval (bar)\ndashed: the threshold")
    ax.set_title(f"specbench compare: {comparison.summary()}", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=120)
    plt.close(fig)
    return buffer.getvalue()
