"""A report comparing real and synthetic rows: one self-contained HTML page
or one PNG (``edgesynth report``; docs/api.md).

The page holds the figures of edgesynth.evaluation.plots (per column, per
pair of columns) as PNGs inlined as ``data:`` URIs, so it needs no other file
and no network, and es.evaluate's figures as a table. A report reads the real
rows: it is not private and is for the analyst's eyes, which the page says.
"""
import base64
import html
import os

from edgesynth.errors import InputError
from edgesynth.evaluation.plots import MAX_PAIRED, figures, pairs, png_bytes, stacked_png
from edgesynth.evaluation.scoring import box, compared, evaluate
from edgesynth.evaluation.table import HEADER, rows
from edgesynth.outputs import write_bytes, write_text
from edgesynth.stdio import is_stdio

NOT_PRIVATE = ("This report reads the real rows: it is not private. It is for the analyst's eyes; do not publish "
               "it (publish synthetic rows, or figures computed from them alone).")
STYLE = """body{font-family:sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}.note{background:#fff4e5;border-left:4px solid #e8a33d;
padding:.6em 1em}table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3em .8em}
td+td,th+th{text-align:right}img{max-width:100%;height:auto}figure{margin:1em 0}"""


def _kind(path):
    """"html" or "png" from the extension of ``path``."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext in (".html", ".htm"):
        return "html"
    if ext == ".png":
        return "png"
    if is_stdio(path):
        raise InputError("a report is a file (.html or .png), not '-': the page is for a browser, not a pipe")
    raise InputError("%s: a report is .html (a page with every figure) or .png (one image)" % os.fspath(path))


def _table_html(report):
    head = "".join("<th>%s</th>" % html.escape(h) for h in HEADER)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(c) for c in r) for r in rows(report))
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _page(title, report, parts, bounds_known):
    """The HTML page: ``parts`` are (kind, label, png bytes)."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>%s</title><style>%s</style></head><body>" % (html.escape(title), STYLE),
           "<h1>%s</h1>" % html.escape(title), '<p class="note">%s</p>' % html.escape(NOT_PRIVATE),
           "<p>%d real rows, %d synthetic rows, columns %s.</p>"
           % (report["n_real"], report["n_synthetic"], html.escape(", ".join(report["columns"]))),
           "<h2>Utility</h2>", _table_html(report),
           "<p>W1 per column in the column's units; joint W1 and range queries with every column scaled to "
           "[0, 1] by %s (%s). A uniform sample of that box is the baseline.</p>"
           % ("the bounds" if bounds_known else "the range of both data sets (no bounds given)",
              html.escape(", ".join("%s: %g to %g" % (c, a, b)
                                    for c, a, b in zip(report["columns"], report["lo"], report["hi"]))))]
    paired = report["columns"][:MAX_PAIRED]
    heading = {"column": "Columns", "pair": "Pairs of columns" if len(paired) == len(report["columns"])
               else "Pairs of the first %d columns (%s)" % (len(paired), ", ".join(paired))}
    for kind, label, png in parts:
        if kind in heading:
            out.append("<h2>%s</h2>" % heading.pop(kind))
        out.append('<figure><img alt="%s" src="data:image/png;base64,%s"></figure>'
                   % (html.escape(label, quote=True), base64.b64encode(png).decode("ascii")))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def report(real, synthetic, columns=None, *, bounds=None, path=None, title=None, seed=0, progress=None):
    """Compare ``synthetic`` rows with ``real`` ones in pictures and figures.

    For every column: histograms and empirical CDFs of both, each over a
    panel of the difference synthetic - real, zoomed to where the data are
    with the bounds marked. For every pair of the first six columns (panels
    grow as d**2): 2-D histograms, real | synthetic. And es.evaluate's
    figures (utility beside a uniform baseline) as a table. Axis labels are the column names; a unit in brackets at the
    end of a name ("temp [C]") is that column's unit in the table.

    real, synthetic: DataFrames, dicts of columns or arrays (n, d); at least
        2 real rows and 1 synthetic row.
    columns: the columns to compare (list or "a,b"; default the synthetic
        rows' columns, or x0, x1, ... of arrays).
    bounds: the public bounds ("LO:HI,...", pairs, a dict by column or the
        device config): marked on the axes and used to normalise, as in
        es.evaluate. Default: the range of both data sets, not marked.
    path: None returns the HTML page as a str; a path ending in .html (or
        .htm) writes that page, one ending in .png writes one PNG of every
        figure and the table; both are replaced atomically and the path is
        returned.
    title: the page's title (default "edgesynth report: real vs synthetic").
        The command puts epsilon and the device size in it.
    seed: int or numpy Generator for es.evaluate's subsampling and queries.
    progress: optional callable ``progress(done, total)`` after each step:
        es.evaluate's 2 d + 6, one per figure, one for the file.

    The report reads the real rows: it is NOT private (the page says so).
    """
    kind = "html" if path is None else _kind(path)
    x, y, names = compared(real, synthetic, columns, "a report")
    lo, hi = box(bounds, names, x, y)
    d = len(names)
    steps = 2 * d + 6
    total = steps + d + len(pairs(d)) + (1 if kind == "png" else 0) + 1
    done = 0

    def tick(n=1):
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)
    figs = evaluate(x, y, names, bounds=list(zip(lo, hi)), seed=seed,
                    progress=lambda step, _: tick(step - done))
    title = title or "edgesynth report: real vs synthetic"
    parts = []
    table = figs if kind == "png" else None  # the page shows the table as HTML
    for part, label, fig in figures(x, y, names, lo, hi, report=table, bounds_known=bounds is not None):
        parts.append((part, label, fig if kind == "png" else png_bytes(fig)))
        tick()
    if kind == "png":
        page = stacked_png([f for _, _, f in parts], title)
        write_bytes(os.fspath(path), page)
    else:
        page = _page(title, figs, parts, bounds is not None)
        if path is not None:
            write_text(os.fspath(path), page)
    tick()
    return page if path is None else path
