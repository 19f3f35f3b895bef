"""`edgesynth report` and es.report: a self-contained HTML page or one PNG of real vs
synthetic rows (per column, per pair, evaluate's figures), with progress; and
es.evaluate's progress."""
import base64
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.evaluation.plots import view
from edgesynth.evaluation.table import unit

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BOUNDS = "0:110,0:100,0:30"


def rows(n, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    a = rng.normal(30 + shift, 5, n)
    return pd.DataFrame({"temp [C]": a, "humid": 0.8 * a + rng.normal(20, 3, n), "count": rng.poisson(4, n)})


@pytest.fixture(scope="module")
def real():
    return rows(400, 0)


@pytest.fixture(scope="module")
def synth():
    return rows(300, 1, shift=0.5)


def images(page):
    return re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)


def test_html_is_self_contained_with_a_figure_per_column_and_pair(real, synth, tmp_path):
    path = tmp_path / "r.html"
    assert es.report(real, synth, bounds=BOUNDS, path=path, title="t <1>") == path
    page = path.read_text(encoding="utf-8")
    found = images(page)
    assert [alt for alt, _ in found] == ["temp [C]", "humid", "count", "temp [C] vs humid", "temp [C] vs count",
                                         "humid vs count"]
    assert all(base64.b64decode(data).startswith(PNG_MAGIC) for _, data in found)
    without_data = re.sub(r'src="data:image/png;base64,[^"]*"', "", page)
    assert not re.search(r"\b(src|href)\s*=", without_data, re.I)  # nothing to fetch
    assert "url(" not in without_data and "@import" not in without_data
    assert "<title>t &lt;1&gt;</title>" in page and "not private" in page
    figures = es.evaluate(real, synth, bounds=BOUNDS)  # the same figures, in the table
    assert "<td>%.4g</td>" % figures["synthetic"]["w1_joint"] in page
    assert "<td>W1 temp [C] (in C)</td>" in page and "<td>W1 humid (in data units)</td>" in page


def test_pair_panels_stop_at_six_columns():
    x, y = np.random.default_rng(0).random((60, 8)), np.random.default_rng(1).random((80, 8))
    page = es.report(x, y)
    alts = [alt for alt, _ in images(page)]
    assert alts[:8] == ["x%d" % i for i in range(8)] and len(alts) == 8 + 15  # pairs of x0..x5 only
    assert "x6 vs" not in page and "Pairs of the first 6 columns" in page


def test_without_a_path_the_page_is_returned(real, synth):
    page = es.report(real, synth, columns="temp [C],humid")
    assert page.startswith("<!DOCTYPE html>") and len(images(page)) == 3
    assert "no bounds given" in page


def test_png_is_one_valid_image_holding_every_panel(real, synth, tmp_path):
    path = tmp_path / "r.png"
    es.report(real, synth, bounds=BOUNDS, path=path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    one = es.report(real[["humid"]], synth[["humid"]], bounds="0:100", path=tmp_path / "one.png")
    one_height = int.from_bytes(one.read_bytes()[20:24], "big")
    assert width == 1100 and height > 3 * one_height  # 3 columns, 3 pairs and a longer table


def test_progress_counts_up_to_its_total(real, synth, tmp_path):
    for name, steps in (("r.html", 2 * 3 + 6 + 3 + 3 + 1), ("r.png", 2 * 3 + 6 + 3 + 3 + 2)):
        calls = []
        es.report(real, synth, bounds=BOUNDS, path=tmp_path / name, progress=lambda d, t: calls.append((d, t)))
        assert [d for d, _ in calls] == list(range(1, steps + 1)) and {t for _, t in calls} == {steps}


def test_evaluate_progress_counts_each_step():
    calls = []
    x, y = rows(300, 2), rows(200, 3)
    quiet = es.evaluate(x, y, bounds=BOUNDS, seed=4)
    loud = es.evaluate(x, y, bounds=BOUNDS, seed=4, progress=lambda d, t: calls.append((d, t)))
    assert loud == quiet  # progress changes nothing
    assert calls == [(i, 12) for i in range(1, 13)]  # 2 d + 6 steps


def test_bad_inputs_are_one_line_errors(real, synth, tmp_path):
    with pytest.raises(es.InputError, match=r"\.html .* or \.png"):
        es.report(real, synth, path=tmp_path / "r.pdf")
    with pytest.raises(es.InputError, match="no column 'zz'"):
        es.report(real, synth, columns=["zz"])
    with pytest.raises(es.InputError, match="at least 2 real rows"):
        es.report(real.iloc[:1], synth)
    assert not list(tmp_path.iterdir())


def test_view_zooms_to_the_data_and_ignores_thin_noise():
    rng = np.random.default_rng(0)
    real = rng.normal(30, 2, 5000)
    synth = np.concatenate([rng.normal(30, 2, 4950), rng.uniform(0, 110, 50)])  # 1% spread over the bounds
    a, b = view(real, synth)
    assert 15 < a < 26 and 34 < b < 45


def test_unit_comes_from_brackets_at_the_end_of_a_name():
    assert unit("temp [C]") == "C" and unit("humid (%)") == "%" and unit("speed [m/s] ") == "m/s"
    assert unit("temp_C") is None and unit("a [b] c") is None


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_report_title_from_config_and_not_private_note(real, synth, tmp_path):
    real.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "syn.csv", index=False)
    r = cli("plan", "--bounds", "0:110,0:100", "--names", "t,h", "--epsilon", "1/2", "--ram", "64K",
            "-o", tmp_path / "dev.json")
    assert r.exit_code == 0, r.output
    r = cli("report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv", "--columns",
            "temp [C],humid", "--config", tmp_path / "dev.json", "-o", tmp_path / "r.html")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h1>edgesynth report: real vs synthetic (epsilon 1/2, 64 KiB device)</h1>" in page
    assert "temp [C]: 0 to 110, humid: 0 to 100" in page
    assert "wrote %s: 2 column(s), 1 pair(s)" % (tmp_path / "r.html") in r.stdout
    assert "NOT private" in r.stderr
    r = cli("report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv", "--columns", "humid",
            "--bounds", "0:100", "--epsilon", "2", "--ram", "1M", "-o", tmp_path / "r.png")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_report_refusals(real, synth, tmp_path):
    real.to_csv(tmp_path / "real.csv", index=False)
    base = ["report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "real.csv", "--columns", "humid"]
    for extra, message in ((["-o", tmp_path / "r.txt"], ".html"),
                           (["--bounds", "5:1", "-o", tmp_path / "r.html"], "bound"),
                           (["--columns", "nope", "-o", tmp_path / "r.html"], "nope")):
        r = cli(*base, *extra)
        assert r.exit_code == 2 and r.output.startswith("error: ") and message in r.output, r.output
    assert not (tmp_path / "r.html").exists()


def test_cli_evaluate_still_prints_its_table(real, synth, tmp_path):
    real.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "syn.csv", index=False)
    r = cli("evaluate", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv", "--columns",
            "temp [C],count", "--bounds", "0:110,0:30")
    assert r.exit_code == 0, r.output
    assert "W1 temp [C] (in C)" in r.stdout and "uniform baseline" in r.stdout
