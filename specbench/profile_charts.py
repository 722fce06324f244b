"""The goodness-of-fit figure of `specbench profile fit`: measured rates beside every model's fit.

Two panels sharing the position axis ``i = 1..K'`` (``K'`` the measured ``K``, or ``--extend-k``):

- left, unconditional ``p_i = P(A >= i)``: the measured rates with their 95% Wilson intervals, and each
  model's fitted ``p_i`` (a line) with its 95% bootstrap band, past the measured ``K`` too;
- right, conditional ``c_i``: measured ``n_i / n_{i-1}`` with Wilson intervals, each model's ``c_i``
  (rising for beta-geometric, falling for depth-decay, flat for iid) with its band.

A dotted vertical line marks the last measured position; the legend gives each model's GOF p-value
and AIC difference to the best one. Reads only the fit objects; draws with matplotlib's Agg canvas.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from specbench import profile_models

_COLOURS = {"iid": "#4c72b0", "beta-geometric": "#dd8452", "depth-decay": "#55a868"}
_MEASURED = "#222222"


def _wilson(successes: int, trials: int) -> tuple[float, float]:
    from scipy import stats

    if trials == 0:
        return 0.0, 1.0
    interval = stats.binomtest(successes, trials).proportion_ci(profile_models.CONFIDENCE, method="wilson")
    return float(interval.low), float(interval.high)


FIGURE_FORMATS = ("png", "svg", "pdf")  # what --figure writes, by its file's suffix


def render_fit_chart(comparison: profile_models.Comparison, num_drafts: int, accepted_per_position: list[int],
                     path: str | Path, extend_k: int | None = None) -> Path:
    """Draw the figure for ``comparison`` (fitted to these counts) up to ``extend_k`` positions into ``path``
    (its folder must exist); return ``path``."""
    path = Path(path)
    k = len(accepted_per_position)
    shown = max(k, extend_k or k)
    reached = [num_drafts, *accepted_per_position[:-1]]
    fig = Figure(figsize=(11.5, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True)
    positions = list(range(1, k + 1))
    measured_p = [n / num_drafts for n in accepted_per_position]
    measured_c = [n / r if r else 0.0 for n, r in zip(accepted_per_position, reached)]
    for ax, values, trials in ((left, measured_p, [num_drafts] * k), (right, measured_c, reached)):
        bounds = [_wilson(n, t) for n, t in zip(accepted_per_position, trials)]
        ax.errorbar(positions, values, yerr=[[v - lo for v, (lo, _) in zip(values, bounds)],
                                             [hi - v for v, (_, hi) in zip(values, bounds)]],
                    fmt="o", ms=4, capsize=3, color=_MEASURED, label="measured (95% Wilson)", zorder=5)
    axis = list(range(1, shown + 1))
    best = comparison.best_fit
    for name, fit in comparison.fits.items():
        extension = fit.extend(shown)
        colour = _COLOURS.get(name, "#8172b3")
        p_text = "not testable" if fit.p_value is None else f"GOF p {fit.p_value:.2g}"
        label = f"{name}: {p_text}, dAIC {fit.aic - best.aic:.1f}" + (" (best)" if name == comparison.best else "")
        for ax, point, band in ((left, extension.rates, extension.rates_ci),
                                (right, extension.conditional_rates, extension.conditional_rates_ci)):
            ax.plot(axis, point, color=colour, lw=1.6, label=label)
            ax.fill_between(axis, [lo for lo, _ in band], [hi for _, hi in band], color=colour, alpha=0.18, lw=0)
    for ax, title in ((left, "unconditional p_i = P(A >= i)"), (right, "conditional c_i = p_i / p_(i-1)")):
        if shown > k:
            ax.axvline(k + 0.5, color="#888888", ls=":", lw=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("draft position i")
        ax.grid(alpha=0.3)
        ax.set_xticks(axis if shown <= 16 else axis[::max(1, shown // 16)])
    left.set_ylabel("acceptance rate")
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize=8, frameon=False)
    fig.suptitle(f"Profile models fitted to {num_drafts:,} drafts at K={k}" +
                 (f", extended to K={shown} (bands: 95% parametric bootstrap)" if shown > k else
                  " (bands: 95% parametric bootstrap)"), fontsize=11)
    fig.savefig(path, dpi=110)
    return path
