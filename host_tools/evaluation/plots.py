"""Comparison plots of real versus synthetic data (PNG, no display needed).

Figures are built on matplotlib's object API with the Agg canvas, so nothing
here touches pyplot's global state or needs a display. There is one figure
per column, per pair of columns and for the utility table: the HTML report
(edgesynth.evaluation.report) shows them one by one, and the demo's and the
report's PNG stacks them into one image.

What a panel shows:

- a column: histograms and empirical CDFs of real and synthetic values, and
  under each the difference synthetic - real;
- a pair of columns: 2-D histograms, real | synthetic, one shared
  logarithmic colour scale;
- the utility table: es.evaluate's figures.

Axes are zoomed to where the data are (1% to 99% quantiles of both samples
pooled, padded by 8%), so a narrow distribution inside wide public bounds
stays readable; the title gives the share of each sample outside the view.
The bounds are drawn as dashed lines where they fall in view and named in
the panel's title. Axis labels are the column names; a unit
written in the name in brackets, ``temp [C]`` or ``temp (C)``, is the unit
of that column's W1 in the table.
"""
import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.image import imsave
from matplotlib.ticker import NullFormatter

from edgesynth.errors import EvaluationInputError
from edgesynth.evaluation.table import HEADER, rows
from edgesynth.outputs import atomic_output

__all__ = ["plot_comparison", "figures", "stacked_png", "png_bytes"]

REAL_COLOR = "#4C72B0"
SYNTH_COLOR = "#DD8452"
DIFF_COLOR = "#55A868"
BOUND_STYLE = dict(color="#888888", linestyle="--", linewidth=1.0)
HIST_BINS = 50
HIST2D_BINS = 64
ECDF_POINTS = 512
DPI = 110
VIEW_QUANTILES = (0.01, 0.99)
VIEW_PAD = 0.08
POOL_POINTS = 10_000        # quantiles per sample that stand for it in the pooled view
COLUMN_SIZE = (10.0, 5.4)   # inches of one column's figure (width, height)
PAIR_SIZE = (10.0, 4.3)     # one pair's figure
GAP = 24                    # white pixels between stacked figures
TABLE_ROW = 0.32            # inches per row of the utility table


def _as_2d(x, what):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0:
        raise EvaluationInputError(f"{what} must be a non-empty (n, d) array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise EvaluationInputError(f"{what} holds a value that is not a finite number")
    return x


def _check(real, synth, names, lo, hi):
    """Arrays, names and bounds of a comparison, checked."""
    real = _as_2d(real, "real")
    synth = _as_2d(synth, "synthetic")
    d = real.shape[1]
    if synth.shape[1] != d:
        raise EvaluationInputError(f"synthetic has {synth.shape[1]} columns, real has {d}")
    names = [str(s) for s in names]
    if len(names) != d:
        raise EvaluationInputError(f"got {len(names)} names for {d} columns")
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,))
    if not np.all(hi > lo):
        raise EvaluationInputError("every hi must be greater than its lo")
    return real, synth, names, lo, hi


def view(real, synth):
    """(a, b): the range a panel shows for one column: from the 1% to the 99%
    quantile of both samples pooled with equal weight, padded by 8% on each
    side. Equal weight keeps a large synthetic sample from setting the view
    alone; the pooled quantiles ignore the thin spread of mass the noise
    leaves over the whole box."""
    grid = np.linspace(0.0, 1.0, min(real.size, synth.size, POOL_POINTS))
    pooled = np.concatenate([np.quantile(real, grid), np.quantile(synth, grid)])
    a, b = np.quantile(pooled, VIEW_QUANTILES)
    pad = VIEW_PAD * (b - a) if b > a else max(abs(a) * VIEW_PAD, 0.5)
    return a - pad, b + pad


def _bins(real, synth, a, b, count):
    """``count`` equal bins over [a, b]; integer-aligned (edges at k + 0.5)
    when both samples hold only whole numbers, so no bin gets an extra value."""
    if np.all(real == np.round(real)) and np.all(synth == np.round(synth)):
        step = max(1.0, np.ceil((b - a) / count))
        start = np.floor(a) - 0.5
        return np.arange(start, b + step, step)
    return np.linspace(a, b, count + 1)


def _density(values, bins):
    """Histogram density of ``values`` per unit, relative to all of them (also
    those outside ``bins``), so real and synthetic heights compare."""
    counts, _ = np.histogram(values, bins=bins)
    return counts / (values.size * np.diff(bins))


def _ecdf(values, grid):
    s = np.sort(values)
    return np.searchsorted(s, grid, side="right") / s.size


def _mark_bounds(ax, lo, hi, a, b, axis="x"):
    line = ax.axvline if axis == "x" else ax.axhline
    for v in (lo, hi):
        if a <= v <= b:
            line(v, **BOUND_STYLE)


def _fmt(v):
    return "%.6g" % v


def draw_column(fig, real, synth, name, lo, hi, bounds_known=True):
    """One column into ``fig`` (a Figure or SubFigure): histogram and CDF of
    real and synthetic values (1-D arrays), each above its difference panel."""
    a, b = view(real, synth)
    grid = fig.add_gridspec(2, 2, height_ratios=[2.6, 1.2], hspace=0.08)
    bins = _bins(real, synth, a, b, HIST_BINS)
    hr, hs = _density(real, bins), _density(synth, bins)
    xs = np.linspace(a, b, ECDF_POINTS)
    fr, fs = _ecdf(real, xs), _ecdf(synth, xs)

    ax = fig.add_subplot(grid[0, 0])
    ax.stairs(hr, bins, fill=True, color=REAL_COLOR, alpha=0.45, label=f"real (n={real.size:,})")
    ax.stairs(hs, bins, color=SYNTH_COLOR, linewidth=1.6, label=f"synthetic (n={synth.size:,})")
    ax.set_ylabel("density")
    ax.set_title("histogram", fontsize="medium")
    ax.legend(fontsize="small", frameon=False, loc="upper right")
    _finish_top(ax, lo, hi, a, b, bounds_known)
    dx = fig.add_subplot(grid[1, 0], sharex=ax)
    dx.stairs(hs - hr, bins, fill=True, color=DIFF_COLOR, alpha=0.7, baseline=0)
    dx.axhline(0, color="black", linewidth=0.6)
    dx.set_ylabel("synth − real", fontsize="small")
    _finish_bottom(dx, name, lo, hi, a, b, bounds_known)

    ax = fig.add_subplot(grid[0, 1])
    ax.plot(xs, fr, color=REAL_COLOR, linewidth=2.2, alpha=0.7, label="real", drawstyle="steps-post")
    ax.plot(xs, fs, color=SYNTH_COLOR, linewidth=1.3, label="synthetic", drawstyle="steps-post")
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("cumulative fraction")
    ax.set_title("empirical CDF (max |ΔF| = %.3g)" % np.max(np.abs(fs - fr)), fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", frameon=False, loc="lower right")
    _finish_top(ax, lo, hi, a, b, bounds_known)
    dx = fig.add_subplot(grid[1, 1], sharex=ax)
    dx.plot(xs, fs - fr, color=DIFF_COLOR, linewidth=1.3, drawstyle="steps-post")
    dx.axhline(0, color="black", linewidth=0.6)
    dx.set_ylabel("synth − real", fontsize="small")
    _finish_bottom(dx, name, lo, hi, a, b, bounds_known)

    shown = "bounds [%s, %s]" % (_fmt(lo), _fmt(hi)) if bounds_known else "no bounds given"
    fig.suptitle("%s   (%s; outside the view: real %s, synthetic %s)"
                 % (name, shown, _outside(real, a, b), _outside(synth, a, b)), fontsize="large")


def _outside(values, a, b):
    return "%.2g%%" % (100 * np.mean((values < a) | (values > b)))


def _finish_top(ax, lo, hi, a, b, bounds_known):
    ax.set_xlim(a, b)
    ax.tick_params(labelbottom=False)
    if bounds_known:
        _mark_bounds(ax, lo, hi, a, b)


def _finish_bottom(ax, name, lo, hi, a, b, bounds_known):
    ax.set_xlim(a, b)
    ax.set_xlabel(name)
    ax.grid(alpha=0.3)
    if bounds_known:
        _mark_bounds(ax, lo, hi, a, b)


def draw_pair(fig, real, synth, names, lo, hi, bounds_known=True):
    """Two columns into ``fig``: 2-D histograms, real | synthetic (arrays of
    shape (n, 2)), same bins over the zoomed view, one log colour scale."""
    (ax0, ax1), (ay0, ay1) = view(real[:, 0], synth[:, 0]), view(real[:, 1], synth[:, 1])
    bx = _bins(real[:, 0], synth[:, 0], ax0, ax1, HIST2D_BINS)
    by = _bins(real[:, 1], synth[:, 1], ay0, ay1, HIST2D_BINS)
    hists = [np.histogram2d(v[:, 0], v[:, 1], bins=(bx, by))[0] / len(v) for v in (real, synth)]
    positive = np.concatenate([h[h > 0] for h in hists])
    vmax = positive.max() if positive.size else 1.0
    vmin = max(positive.min() if positive.size else vmax, vmax * 1e-4)
    norm = LogNorm(vmin=vmin, vmax=vmax if vmax > vmin else vmin * 10)
    grid = fig.add_gridspec(1, 2, wspace=0.08)
    axes, mesh = [], None
    for i, (h, what, n) in enumerate(zip(hists, ("real", "synthetic"), (len(real), len(synth)))):
        ax = fig.add_subplot(grid[0, i], sharey=axes[0] if axes else None)
        mesh = ax.pcolormesh(bx, by, np.ma.masked_less_equal(h.T, 0), norm=norm, cmap="viridis")
        ax.set_facecolor("#f2f2f2")  # empty cells stay blank
        ax.set_xlim(ax0, ax1)
        ax.set_ylim(ay0, ay1)
        ax.set_xlabel(names[0])
        if i == 0:
            ax.set_ylabel(names[1])
        else:
            ax.tick_params(labelleft=False)
        ax.set_title(f"{what} (n={n:,})", fontsize="medium")
        if bounds_known:
            _mark_bounds(ax, lo[0], hi[0], ax0, ax1, "x")
            _mark_bounds(ax, lo[1], hi[1], ay0, ay1, "y")
        axes.append(ax)
    bar = fig.colorbar(mesh, ax=axes, label="fraction of rows per cell (log)", shrink=0.9)
    bar.ax.yaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks crowd a short log range
    fig.suptitle("%s vs %s" % (names[0], names[1]), fontsize="large")


def draw_table(fig, report):
    """es.evaluate's figures as a table into ``fig``."""
    ax = fig.add_subplot()
    ax.axis("off")
    t = ax.table(cellText=[list(r) for r in rows(report)], colLabels=list(HEADER),
                 colWidths=[0.56, 0.2, 0.24], loc="center", cellLoc="left")
    t.auto_set_font_size(False)
    t.set_fontsize(10)
    t.scale(1, 1.4)


def _new(width, height):
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def column_figure(real, synth, name, lo, hi, bounds_known=True):
    """A Figure of one column (1-D arrays of real and synthetic values)."""
    fig = _new(*COLUMN_SIZE)
    draw_column(fig, np.asarray(real, float), np.asarray(synth, float), name, lo, hi, bounds_known)
    return fig


def pair_figure(real, synth, names, lo, hi, bounds_known=True):
    """A Figure of one pair of columns (arrays of shape (n, 2))."""
    fig = _new(*PAIR_SIZE)
    draw_pair(fig, np.asarray(real, float), np.asarray(synth, float), names, lo, hi, bounds_known)
    return fig


def table_figure(report):
    """A Figure of es.evaluate's figures (``report``) as a table."""
    fig = _new(COLUMN_SIZE[0], TABLE_ROW * (len(report["columns"]) + 4))
    draw_table(fig, report)
    return fig


def title_figure(title):
    """A strip of COLUMN_SIZE's width holding ``title``."""
    fig = _new(COLUMN_SIZE[0], 0.5)
    fig.suptitle(title, fontsize="x-large", fontweight="bold")
    return fig


MAX_PAIRED = 6  # pair panels grow as d**2: only the first six columns are paired (15 panels)


def pairs(d):
    """The pairs (i, j), i < j, of the first min(d, MAX_PAIRED) of d columns, in order."""
    d = min(d, MAX_PAIRED)
    return [(i, j) for i in range(d) for j in range(i + 1, d)]


def figures(real, synth, names, lo, hi, report=None, bounds_known=True):
    """Yield ``(kind, label, Figure)`` for each column ("column", its name),
    each pair of columns ("pair", "a vs b") and, when ``report`` (es.evaluate's
    dict) is given, the utility table ("table", "utility"). real, synth:
    arrays (n, d); lo, hi: the bounds per column (marked when ``bounds_known``)."""
    real, synth, names, lo, hi = _check(real, synth, names, lo, hi)
    for j, name in enumerate(names):
        yield "column", name, column_figure(real[:, j], synth[:, j], name, lo[j], hi[j], bounds_known)
    for i, j in pairs(len(names)):
        yield "pair", "%s vs %s" % (names[i], names[j]), pair_figure(
            real[:, [i, j]], synth[:, [i, j]], [names[i], names[j]], lo[[i, j]], hi[[i, j]], bounds_known)
    if report is not None:
        yield "table", "utility", table_figure(report)


def png_bytes(fig):
    """The PNG of ``fig``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def stacked_png(figs, title=None):
    """One PNG of ``figs`` (all COLUMN_SIZE's width) one under the other,
    under a ``title`` strip. Each is drawn alone, so it looks as on its own."""
    parts = [title_figure(title)] if title else []
    images = []
    for fig in parts + list(figs):
        fig.canvas.draw()
        images.append(np.asarray(fig.canvas.buffer_rgba()))
    width = max(im.shape[1] for im in images)
    white = [np.pad(im, ((0, GAP if k < len(images) - 1 else 0), (0, width - im.shape[1]), (0, 0)), constant_values=255)
             for k, im in enumerate(images)]
    buf = io.BytesIO()
    imsave(buf, np.concatenate(white), format="png", dpi=DPI)
    return buf.getvalue()


def plot_comparison(real, synth, names, lo, hi, path, title=None, report=None):
    """Write one PNG comparing real and synthetic data: the figures of
    ``figures`` (each column, each pair, the utility table of ``report``)
    stacked under ``title``.

    real, synth: arrays (n, d) in the columns' units (1-D: one column).
    names: the d column names (axis labels). lo, hi: the public bounds per
    column, marked on the axes. path: the PNG to write (atomically).
    Returns ``path``.
    """
    png = stacked_png((f for _, _, f in figures(real, synth, names, lo, hi, report)), title)
    with atomic_output(path) as fh:
        fh.write(png)
    return path
