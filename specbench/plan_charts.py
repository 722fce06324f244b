"""PNG charts of plan records (``kind == "plan"``); they read records only and never re-run anything.

- ``plan_throughput.png``: tokens/s per GPU against ``K`` (left, log scale) and the speed-up over
  ``K = 0`` (right), one line per batch size, 95% bands where the profile had draws; each batch
  size's best ``K`` is a filled marker.
- ``plan_best_k.png``: the best ``K`` against the batch size (log2 axis), with the range of best ``K``
  over the profile's draws as bars, and the best ``K``'s speed-up on a second axis (1 = no gain).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

THROUGHPUT_CHART = "plan_throughput.png"
BEST_K_CHART = "plan_best_k.png"


def _by_batch(records: Sequence[dict]) -> dict[int, list[dict]]:
    groups: dict[int, list[dict]] = {}
    for record in records:
        groups.setdefault(int(record["batch_size"]), []).append(record)
    return {b: sorted(rows, key=lambda r: r["num_spec_tokens"]) for b, rows in sorted(groups.items())}


def render_plan_charts(records: Sequence[dict], out_dir: str | Path) -> list[Path]:
    """Draw the plan charts of ``records`` (other kinds are ignored); returns the paths written."""
    plans = [r for r in records if r.get("kind") == "plan" and r.get("candidate", "chain") == "chain"]  # chains
    if not plans:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = _by_batch(plans)
    profile = plans[0].get("profile", "")
    return [_throughput(groups, profile, out_dir / THROUGHPUT_CHART), _best_k(groups, profile, out_dir / BEST_K_CHART)]


def _throughput(groups: dict[int, list[dict]], profile: str, path: Path) -> Path:
    figure = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = figure.subplots(1, 2)
    cycle = [f"C{i % 10}" for i in range(len(groups))]
    for colour, (b, rows) in zip(cycle, groups.items()):
        ks = [r["num_spec_tokens"] for r in rows]
        for axis, key in ((left, "tokens_per_second_per_gpu"), (right, "speedup")):
            values = [r[key] for r in rows]
            axis.plot(ks, values, "-o", color=colour, markersize=3, label=f"B={b}")
            lows = [r.get(f"{key}_ci_low") for r in rows]
            highs = [r.get(f"{key}_ci_high") for r in rows]
            if all(v is not None for v in lows + highs):
                axis.fill_between(ks, lows, highs, color=colour, alpha=0.18, linewidth=0)
            best = next(r for r in rows if r["is_best"])
            axis.plot([best["num_spec_tokens"]], [best[key]], "o", color=colour, markersize=9,
                      markeredgecolor="black")
    left.set_yscale("log")
    left.set_ylabel("tokens/s per GPU")
    right.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    right.set_ylabel("speed-up over K = 0 (same batch size)")
    for axis in (left, right):
        axis.set_xlabel("K (draft tokens per step; 0 = no speculation)")
        axis.grid(True, alpha=0.3)
    right.legend(fontsize=8, ncols=2, title="batch size", title_fontsize=8)
    figure.suptitle(f"Plan: throughput against K per batch size ({profile}); big markers: best K, bands: 95%")
    figure.savefig(path, dpi=110)
    return path


def _best_k(groups: dict[int, list[dict]], profile: str, path: Path) -> Path:
    figure = Figure(figsize=(8, 4.8), layout="constrained")
    axis = figure.subplots()
    sizes = list(groups)
    best = [groups[b][0]["best_num_spec_tokens"] for b in sizes]
    low = [groups[b][0].get("best_k_low", k) for b, k in zip(sizes, best)]
    high = [groups[b][0].get("best_k_high", k) for b, k in zip(sizes, best)]
    axis.errorbar(sizes, best, yerr=[[k - lo for k, lo in zip(best, low)], [hi - k for k, hi in zip(best, high)]],
                  fmt="o-", color="C0", capsize=4, label="best K (bars: range over the profile's draws)")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("batch size B")
    axis.set_ylabel("best K")
    axis.set_ylim(bottom=-0.3)
    axis.grid(True, alpha=0.3)
    gains = [next(r for r in groups[b] if r["is_best"])["speedup"] for b in sizes]
    twin = axis.twinx()
    twin.plot(sizes, gains, "s--", color="C1", markersize=4, label="speed-up at the best K")
    twin.axhline(1.0, color="C1", linewidth=0.6, linestyle=":")
    twin.set_ylabel("speed-up over K = 0")
    handles = axis.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    # below the axes: inside, any corner covers a point (upper right held B = 256's best K and speed-up)
    figure.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=2)
    figure.suptitle(f"Plan: best K against batch size ({profile})")
    figure.savefig(path, dpi=110)
    return path
