"""Charts of ``specbench kernels`` results, drawn from the records alone (never re-running anything).

For each (acceptance, dtype) group of successful records:

- ``time_vs_batch_<group>.png``: median µs against batch size (log-log) per implementation,
  one panel per mode/draft and sampling parameters (rows: ``probabilistic/logits top_k=50``, a tree's shape and
  a method other than token each its own row) and (K, V) (columns, from the left: the shapes the row has; a
  tree's panels say N, its nodes); dashed lines are CUDA-graph timings, the shaded band p20-p80.
- ``throughput_vs_batch_<group>.png``: tokens per second through the sampler, same layout.
- ``speedup_<impl>_<group>[_graph].png``: the speed-up over the torch baseline as a heatmap over
  (batch size, K: the Ks the panel has), one panel per mode/draft (rows) and V (columns), for every other
  implementation; a cell reads 0.04x, 1.2x or 12x.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

from specbench.sampling_cases import KNOBS, sampling_label

_PLAIN = FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1000 else f"{value:g}")  # 1,000 not 10^3

_SAMPLING_FIELDS = (*KNOBS, "sampling", "logprobs")
_MODE_ORDER = {"greedy": 0, "probabilistic": 1, "synthetic": 2}
_DRAFT_ORDER = {"logits": 0, "probs": 1, "none": 2}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "all"


def _variant(row: pd.Series) -> str:
    # the sampling parameters (absent, so NaN in a frame, when not set) make a variant of their own
    fields = {name: row.get(name) for name in _SAMPLING_FIELDS}
    fields = {name: value for name, value in fields.items() if isinstance(value, str) or pd.notna(value)}
    base = f"{row['mode']}/{row['draft']}" if row["mode"] == "probabilistic" else row["mode"]
    target = row.get("target")
    probs = " target-probs" if isinstance(target, str) and target == "probs" else ""  # its own line, not a zigzag
    tree = row.get("tree")
    shape = f" tree {tree}" if isinstance(tree, str) else ""  # a tree's rows are not the chain of K = N
    method = row.get("method")
    rule = f" method={method}" if isinstance(method, str) and method != "token" else ""  # as the table says it
    return base + sampling_label(fields) + probs + shape + rule


def _variants(frame: pd.DataFrame) -> list[str]:
    rows = frame[["mode", "draft", "variant"]].drop_duplicates().itertuples(index=False)
    ordered = sorted(rows, key=lambda p: (_MODE_ORDER.get(p.mode, 9), _DRAFT_ORDER.get(p.draft, 9), p.mode,
                                          p.variant))
    return list(dict.fromkeys(p.variant for p in ordered))


# what the charts put on a log axis: a record edited to hold 0, a negative number or NaN there has no place on it
_LOG_FIELDS = ("batch_size", "median_us", "tokens_per_s")


def check_values(records: list[dict]) -> None:
    """A ``ValueError`` naming the first successful kernels record whose batch size, median or tokens per second
    is not a finite number above 0 (a hand-edited file: a run records none)."""
    for record in records:
        if record.get("kind") != "kernels" or record.get("status") != "ok":
            continue
        for name in (name for name in _LOG_FIELDS if name in record):  # a missing one: a field a chart needs
            value = record[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} {value!r} in an ok row of {record.get('impl')!r}; a chart needs a finite "
                                 f"number above 0")


def _ok_frame(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame([r for r in records if r.get("kind") == "kernels" and r.get("status") == "ok"])
    if frame.empty:
        return frame
    frame["variant"] = frame.apply(_variant, axis=1)
    frame["acceptance"] = frame["acceptance"].fillna("").astype(str)
    empty = frame["acceptance"] == ""
    frame.loc[empty, "acceptance"] = frame.loc[empty, "acceptance_length"].map(lambda v: f"{v:g}")
    return frame


def _panels(n_rows: int, n_cols: int, title: str, extra_width: float = 0.0):
    size = (max(4.5 * n_cols + extra_width, 6.5), 3.4 * n_rows + 0.6)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    fig.suptitle(title)
    return fig, axes


def _label_log_axis(axis, low: float, high: float, formatter: FuncFormatter) -> None:
    # a log axis labels its decades only: one spanning less than a decade would show no number at
    # all, one spanning a decade or two a single one, too few to read a value off
    decades = math.log10(high / low)
    if decades < 1:
        axis.set_major_locator(MaxNLocator(nbins=4))  # so close to linear that linear steps read best
        axis.set_minor_locator(NullLocator())
    elif decades < 3:
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(formatter)
    axis.set_minor_formatter(NullFormatter())


def _legend_below(fig, handles: list, labels: list[str]) -> None:
    # as many columns as fit across the figure: long implementation names get fewer
    renderer = fig.canvas.get_renderer()
    for ncols in range(min(len(labels), 6), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols)
        if ncols == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return
        legend.remove()


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _shapes(frame: pd.DataFrame) -> list[tuple[int, int]]:
    return sorted(frame[["num_spec_tokens", "vocab_size"]].drop_duplicates().itertuples(index=False, name=None))


def _k_name(panel: pd.DataFrame) -> str:
    # a tree's rows count its N nodes (records keep them as num_spec_tokens), a chain's its K drafts
    return "N" if "tree" in panel and panel["tree"].notna().any() else "K"


def _times(value: float) -> str:
    # a speed-up as a cell reads it: two significant digits below 10x (0.04x, 1.2x), whole above
    return f"{value:.0f}x" if value >= 9.95 else f"{value:.2g}x"


def _line_chart(group: pd.DataFrame, column: str, ylabel: str, title: str, path: Path, band: bool) -> Path:
    variants = _variants(group)
    # each row's panels are the (K, V) shapes its variant has, from the left (a tree has its N alone)
    shapes = {variant: _shapes(group[group["variant"] == variant]) for variant in variants}
    impls = sorted(group["impl"].unique(), key=lambda name: (name != "torch", name))
    colors = {name: f"C{i}" for i, name in enumerate(impls)}
    fig, axes = _panels(len(variants), max(len(row) for row in shapes.values()), title)
    for ax in axes.flat:
        ax.set_axis_off()
    for r, variant in enumerate(variants):
        for c, (k, vocab) in enumerate(shapes[variant]):
            ax = axes[r][c]
            ax.set_axis_on()
            panel = group[(group["variant"] == variant) & (group["num_spec_tokens"] == k)
                          & (group["vocab_size"] == vocab)]
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            low, high = panel[column].min(), panel[column].max()
            if low == high:  # one point, or a flat line: give the log axis some room
                ax.set_ylim(low / 2, high * 2)
            for (impl, graph), rows in panel.groupby(["impl", "cuda_graph"]):
                rows = rows.sort_values("batch_size")
                style = "--" if graph else "-"
                label = f"{impl} (CUDA graph)" if graph else impl
                ax.plot(rows["batch_size"], rows[column], style, marker="o", color=colors[impl], label=label)
                if band:
                    ax.fill_between(rows["batch_size"], rows["p20_us"], rows["p80_us"], color=colors[impl], alpha=0.15)
            batches = sorted(panel["batch_size"].unique())
            ax.set_xticks(batches, [str(b) for b in batches])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_title(f"{variant}, {_k_name(panel)}={k}, V={vocab}", fontsize=9)
            ax.set_xlabel("batch size")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            _label_log_axis(ax.yaxis, *ax.get_ylim(), _PLAIN)
    legend = {}
    for ax in axes.flat:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    order = sorted(legend, key=lambda label: (label.split()[0] != "torch", label))
    if band:
        order.append("shaded: p20-p80 of the samples")
        legend[order[-1]] = Patch(color="0.5", alpha=0.3)
    _legend_below(fig, [legend[label] for label in order], order)
    return _save(fig, path)


def _heatmap(group: pd.DataFrame, title: str, path: Path) -> Path:
    variants = _variants(group)
    vocabs = sorted(group["vocab_size"].unique())
    batches = sorted(group["batch_size"].unique())
    # a log scale centred on 1x: slower is red, faster green, as far as the largest factor either way
    values = group["speedup_vs_torch"].astype(float)
    reach = max(abs(np.log(values.min())), abs(np.log(values.max())), np.log(1.1))
    norm = LogNorm(vmin=float(np.exp(-reach)), vmax=float(np.exp(reach)))
    fig, axes = _panels(len(variants), len(vocabs), title, extra_width=1.5)
    image = None
    for r, variant in enumerate(variants):
        for c, vocab in enumerate(vocabs):
            ax = axes[r][c]
            panel = group[(group["variant"] == variant) & (group["vocab_size"] == vocab)]
            if panel.empty:
                ax.set_axis_off()
                continue
            ks = sorted(panel["num_spec_tokens"].unique())  # the panel's own (a tree's N alone)
            grid = np.full((len(ks), len(batches)), np.nan)
            for row in panel.itertuples():
                grid[ks.index(row.num_spec_tokens), batches.index(row.batch_size)] = row.speedup_vs_torch
            image = ax.imshow(grid, cmap="RdYlGn", norm=norm, origin="lower", aspect="auto")
            for (i, j), value in np.ndenumerate(grid):
                if np.isnan(value):  # not timed: skipped, failed or not in the grid
                    ax.text(j, i, "-", ha="center", va="center", fontsize=8, color="gray")
                    continue
                strong = abs(np.log(value)) > 0.6 * reach  # dark cells get white text
                ax.text(j, i, _times(value), ha="center", va="center", fontsize=8,
                        color="white" if strong else "black")
            ax.set_xticks(range(len(batches)), [str(b) for b in batches])
            ax.set_yticks(range(len(ks)), [str(k) for k in ks])
            ax.set_xlabel("batch size")
            ax.set_ylabel(_k_name(panel))
            ax.set_title(f"{variant}, V={vocab}", fontsize=9)
    bar = fig.colorbar(image, ax=axes, shrink=0.8, label="speed-up over torch")
    _label_log_axis(bar.ax.yaxis, norm.vmin, norm.vmax, FuncFormatter(lambda v, _: f"{v:g}x"))
    return _save(fig, path)


def render_kernel_charts(records: list[dict], out_dir: str | Path) -> list[Path]:
    """Write every kernels chart for ``records`` into ``out_dir``; return the paths written.

    Records other than successful ``"kind": "kernels"`` ones are ignored; no records, no charts.
    """
    out_dir = Path(out_dir)
    frame = _ok_frame(records)
    if frame.empty:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (label, dtype), group in frame.groupby(["acceptance", "dtype"]):
        tag = _slug(f"L{label}_{dtype}")
        about = f"acceptance {label}, {dtype}"
        written.append(_line_chart(group, "median_us", "median µs per step", f"Time per verification step ({about})",
                                   out_dir / f"time_vs_batch_{tag}.png", band=True))
        written.append(_line_chart(group, "tokens_per_s", "tokens / s", f"Tokens per second through the sampler "
                                   f"({about})", out_dir / f"throughput_vs_batch_{tag}.png", band=False))
        speedups = group[(group["impl"] != "torch") & group["speedup_vs_torch"].notna()]
        for (impl, graph), part in speedups.groupby(["impl", "cuda_graph"]):
            suffix = "_graph" if graph else ""
            kind = "CUDA graphs" if graph else "no CUDA graph"
            written.append(_heatmap(part, f"{impl}: speed-up over torch ({about}, {kind})",
                                    out_dir / f"speedup_{_slug(impl)}_{tag}{suffix}.png"))
    return written
