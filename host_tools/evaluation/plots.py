"""Comparison plots of real versus synthetic data (PNG, no display needed).

Figures are built on matplotlib's object API with the Agg canvas, so nothing
here touches pyplot's global state or needs a display.
"""
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from edgesynth.outputs import atomic_output

__all__ = ["plot_comparison"]

REAL_COLOR = "#4C72B0"
SYNTH_COLOR = "#DD8452"
HIST_BINS = 50
HIST2D_BINS = 64
ECDF_POINTS = 512
DPI = 110


def _as_2d(x, what):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"{what} must be a non-empty (n, d) array, got shape {x.shape}")
    return x


def _ecdf_on_grid(values, grid):
    """Empirical CDF of ``values`` evaluated at ``grid`` (kept small to plot)."""
    s = np.sort(values[np.isfinite(values)])
    return np.searchsorted(s, grid, side="right") / max(s.size, 1)


def plot_comparison(real, synth, names, lo, hi, path, title=None):
    """Write a PNG comparing real and synthetic data channel by channel.

    One row per channel: overlaid density histograms (same bins over the
    public range ``[lo, hi]``) and empirical CDFs. When there are at least two
    channels, a last row shows 2-D histograms of the first two channels, real
    on the left and synthetic on the right, with the same bins and one shared
    logarithmic colour scale.

    Parameters
    ----------
    real, synth : array_like, shape (n, d)
        Real and synthetic points in the channels' own units (a 1-D array is
        one channel). Values outside ``[lo, hi]`` are clipped onto the edge
        for display.
    names : sequence of str, length d
        Channel names, used as axis labels.
    lo, hi : array_like of length d
        Public domain bounds per channel (the plotting range).
    path : str or path-like
        Output file; written as PNG.
    title : str, optional
        Figure title.

    Returns
    -------
    str or path-like
        ``path``, as given.
    """
    real = _as_2d(real, "real")
    synth = _as_2d(synth, "synth")
    d = real.shape[1]
    if synth.shape[1] != d:
        raise ValueError(f"synth has {synth.shape[1]} columns, real has {d}")
    names = [str(s) for s in names]
    if len(names) != d:
        raise ValueError(f"got {len(names)} names for {d} channels")
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,))
    if not np.all(hi > lo):
        raise ValueError("every hi must be greater than its lo")
    real = np.clip(real, lo, hi)
    synth = np.clip(synth, lo, hi)

    extra = 1 if d >= 2 else 0
    heights = [1.0] * d + [1.6] * extra
    fig = Figure(figsize=(9.0, 2.3 * d + 3.4 * extra + (0.4 if title else 0.0)),
                 dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(d + extra, 2, height_ratios=heights)
    label_real = f"real (n={real.shape[0]:,})"
    label_synth = f"synthetic (n={synth.shape[0]:,})"

    for j in range(d):
        bins = np.linspace(lo[j], hi[j], HIST_BINS + 1)
        ax = fig.add_subplot(grid[j, 0])
        hr, _ = np.histogram(real[:, j], bins=bins, density=True)
        hs, _ = np.histogram(synth[:, j], bins=bins, density=True)
        ax.stairs(hr, bins, fill=True, color=REAL_COLOR, alpha=0.45, label=label_real)
        ax.stairs(hs, bins, color=SYNTH_COLOR, linewidth=1.6, label=label_synth)
        ax.set_xlim(lo[j], hi[j])
        ax.set_xlabel(names[j])
        ax.set_ylabel("density")
        ax.set_title(f"{names[j]}: histogram", fontsize="medium")
        if j == 0:
            ax.legend(fontsize="small", frameon=False)

        ax = fig.add_subplot(grid[j, 1])
        xs = np.linspace(lo[j], hi[j], ECDF_POINTS)
        ax.step(xs, _ecdf_on_grid(real[:, j], xs), where="post",
                color=REAL_COLOR, linewidth=2.2, alpha=0.7, label="real")
        ax.step(xs, _ecdf_on_grid(synth[:, j], xs), where="post",
                color=SYNTH_COLOR, linewidth=1.3, label="synthetic")
        ax.set_xlim(lo[j], hi[j])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(names[j])
        ax.set_ylabel("cumulative fraction")
        ax.set_title(f"{names[j]}: empirical CDF", fontsize="medium")
        ax.grid(alpha=0.3)
        if j == 0:
            ax.legend(fontsize="small", frameon=False, loc="lower right")

    if extra:
        bx = np.linspace(lo[0], hi[0], HIST2D_BINS + 1)
        by = np.linspace(lo[1], hi[1], HIST2D_BINS + 1)
        h_real, _, _ = np.histogram2d(real[:, 0], real[:, 1], bins=(bx, by), density=True)
        h_synth, _, _ = np.histogram2d(synth[:, 0], synth[:, 1], bins=(bx, by), density=True)
        positive = np.concatenate([h_real[h_real > 0], h_synth[h_synth > 0]])
        vmax = positive.max() if positive.size else 1.0
        vmin = max(positive.min() if positive.size else vmax, vmax * 1e-4)
        norm = LogNorm(vmin=vmin, vmax=vmax if vmax > vmin else vmin * 10)
        axes = [fig.add_subplot(grid[d, 0]), fig.add_subplot(grid[d, 1])]
        mesh = None
        for ax, h, what in zip(axes, (h_real, h_synth), ("real", "synthetic")):
            shown = np.ma.masked_less_equal(h.T, 0)  # empty cells stay blank
            mesh = ax.pcolormesh(bx, by, shown, norm=norm, cmap="viridis")
            ax.set_facecolor("#f2f2f2")
            ax.set_xlim(lo[0], hi[0])
            ax.set_ylim(lo[1], hi[1])
            ax.set_xlabel(names[0])
            ax.set_ylabel(names[1])
            ax.set_title(f"{what}: {names[0]} vs {names[1]}", fontsize="medium")
        fig.colorbar(mesh, ax=axes, label="density (log scale)", shrink=0.9)

    if title:
        fig.suptitle(title)
    with atomic_output(path) as fh:
        fig.savefig(fh, format="png", dpi=DPI)
    return path
