"""`calibprob report --html`: one self-contained page, rendered by a real browser.

The browser test needs Debian's `chromium` (`make test` installs it when it runs as root);
it skips only when no Chromium is on PATH.
"""

import base64
import html
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
import xarray as xr

from calibprob.compare import load_results, parse_spec, run_comparison, write_html
from calibprob.compare.report import HTML_SECTIONS

SPEC = {
    "name": "html-demo",
    "description": "OLS on a noisy Branin, with a distribution calibrator and jackknife+",
    "datasets": [{"name": "branin", "function": "branin", "n": 160, "noise": 0.3}],
    "split": {"train": 0.5, "calibrate": 0.25, "test": 0.25},
    "repetitions": 3,
    "seed": 11,
    "base": {"kind": "ols"},
    "methods": {
        "vanilla": {"kind": "base"},
        "scaled": {"kind": "variance-scaling"},
        "isotonic": {"kind": "isotonic", "extrapolate": True},
        "J+": {"kind": "jackknife-plus"},
    },
    "confidence_level": [0.5, 0.9],
}


@pytest.fixture(scope="module")
def results_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "r.nc"
    run_comparison(parse_spec(SPEC), out, progress=False)
    return out


@pytest.fixture(scope="module")
def page(results_file):
    return write_html(results_file, results_file.with_name("report.html"))


class Page(HTMLParser):
    """Headings, image sources, every URL-bearing attribute, and the CSS text of a page."""

    URL_ATTRS = {
        "src",
        "href",
        "srcset",
        "poster",
        "data",
        "action",
        "formaction",
        "background",
        "cite",
        "manifest",
        "icon",
        "ping",
        "longdesc",
        "xlink:href",
    }

    def __init__(self):
        super().__init__()
        self.h2, self.imgs, self.urls, self.css, self.tags = [], [], [], [], []
        self._in = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in = tag
        for k, v in attrs:
            if k in self.URL_ATTRS and v is not None:
                self.urls.append((tag, k, v))
            if k == "style" and v:
                self.css.append(v)
        if tag == "img":
            self.imgs.append(dict(attrs).get("src", ""))

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "h2":
            self.h2.append(data.strip())
        if self._in == "style":
            self.css.append(data)


def network_references(text: str) -> list[str]:
    """Everything in an HTML page that would make a browser fetch something from elsewhere."""
    p = Page()
    p.feed(text)
    bad = []
    for tag, attr, value in p.urls:
        v = value.strip().lower()
        # allowed: inline data, in-page anchors; anything else (http(s)://, //host, file paths) is a request
        if not (v.startswith("data:") or v.startswith("#")):
            bad.append(f"<{tag} {attr}={value[:60]!r}>")
    for css in p.css:
        for m in re.finditer(r"url\(\s*['\"]?([^'\")]*)", css, flags=re.I):
            if not m.group(1).strip().lower().startswith("data:"):
                bad.append(f"css url({m.group(1)[:60]})")
        if re.search(r"@import", css, flags=re.I):
            bad.append("css @import")
    if "script" in p.tags or "link" in p.tags or "iframe" in p.tags:
        bad.append("a <script>, <link> or <iframe> element")
    return bad


def test_the_network_check_catches_every_kind_of_remote_reference():
    # the checker below must be able to fail, or the next test proves nothing
    for snippet in (
        '<img src="https://cdn.example/x.png">',
        '<a href="http://x">x</a>',
        '<img src="//cdn.example/x.png">',
        '<div style="background:url(http://x/y.png)"></div>',
        "<style>@import 'x.css';</style>",
        '<style>b{background:url("https://x")}</style>',
        "<script>1</script>",
        '<img src="plot.png">',
        '<img srcset="https://x 2x">',
    ):
        assert network_references(f"<html><body>{snippet}</body></html>"), snippet
    assert not network_references('<html><body><a href="#x">x</a><img src="data:image/png;base64,AA=="></body></html>')


def test_report_is_one_file_with_no_network_reference(page):
    text = page.read_text(encoding="utf-8")
    assert network_references(text) == []
    assert not list(page.parent.glob("*.png"))  # nothing written beside it
    assert not page.with_name("r_plots").exists()


def test_report_has_every_section_and_its_plots_are_real_pngs(page):
    from PIL import Image

    p = Page()
    p.feed(page.read_text(encoding="utf-8"))
    assert p.h2 == [s for s in HTML_SECTIONS if s != "Diagnostics"]  # no diagnostics in this file
    # reliability, PIT, coverage-vs-width and fit times for the one data set
    assert len(p.imgs) == 4
    for src in p.imgs:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64"
        img = Image.open(io.BytesIO(base64.b64decode(data)))
        img.verify()
        assert img.format == "PNG" and 300 <= img.size[0] <= 1300  # fits a laptop screen at 1:1


def test_report_shows_the_stored_ranking_and_the_under_coverage_rule(page, results_file):
    from calibprob.compare.ranking import rank_results, score_rows

    text = page.read_text(encoding="utf-8")
    res = load_results(results_file)
    rk = rank_results(res.drop_vars(["fit_time", "base_fit_time"]))
    best = score_rows(rk, "branin")[0]
    assert best["verdict"] == "best"
    # the best pipeline's row is the first of the NLL table, in bold
    assert re.search(r'<tr class="best"><td>1</td><td class="l">' + re.escape(best["pipeline"]), text)
    assert "intervals only: ranked by width below" in text  # J+ has no NLL
    assert "under-covers" in text  # the rule is stated


def test_diagnostics_section_only_when_the_file_has_diagnostics(results_file, tmp_path):
    tree = xr.open_datatree(results_file, engine="h5netcdf").load()
    tree.close()
    root = tree.to_dataset(inherit=False)
    rhat = xr.DataArray(
        np.array([[[1.002, 1.004, 1.03, 1.0]] * 3]),
        dims=("dataset", "repetition", "calibrator"),
        coords={k: root[k] for k in ("dataset", "repetition", "calibrator")},
        attrs={"long_name": "largest split r-hat of the task's posterior"},
    )
    tree["diagnostics"] = xr.DataTree(xr.Dataset({"rhat": rhat}))
    with_diag = tmp_path / "diag.nc"
    tree.to_netcdf(with_diag, engine="h5netcdf")
    page = write_html(with_diag, tmp_path / "diag.html")
    p = Page()
    p.feed(page.read_text(encoding="utf-8"))
    assert p.h2 == list(HTML_SECTIONS)
    text = page.read_text(encoding="utf-8")
    assert "largest split r-hat" in text
    # the row over 1.01 (isotonic, the third calibrator) is flagged, the others not
    assert re.search(r'<tr class="under"><td class="l">branin</td><td class="l">isotonic</td>', text)
    assert len(re.findall(r'<tr class="under"><td class="l">branin', text)) == 1


def test_cli_report_html_writes_only_the_page(results_file, tmp_path, capsys):
    from calibprob.cli import main

    out = tmp_path / "cli.html"
    assert main(["report", str(results_file), "--html", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.err and "ranking by nll" in captured.out
    assert out.is_file() and [f.name for f in tmp_path.iterdir()] == ["cli.html"]
    assert main(["report", str(results_file), "--html", str(tmp_path / "missing" / "r.html")]) == 2
    assert "its folder" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"by must be one of 'nll', 'crps'"):
        write_html(results_file, tmp_path / "x.html", rank_by="ece")
    with pytest.raises(ValueError, match="is a folder; give a file name"):
        write_html(results_file, tmp_path)
    with pytest.raises(ValueError, match="results must be a results file or its root Dataset"):
        write_html(xr.Dataset(), tmp_path / "y.html")


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="Debian's chromium is not installed (make test installs it as root)")
def test_report_renders_in_headless_chromium(page, tmp_path):
    from PIL import Image

    browser = _chromium()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--user-data-dir=" + str(tmp_path / "profile"),
    ]
    shot = tmp_path / "shot.png"
    # a laptop screen
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1366,768", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    img = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert img.shape == (768, 1366)
    assert img.std() > 10, "the screenshot is blank"
    assert (img < 128).mean() > 0.01  # there is dark text on it
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    p = Page()
    p.feed(dom)
    assert p.h2 == [s for s in HTML_SECTIONS if s != "Diagnostics"]
    assert len(p.imgs) == 4


def test_base_that_did_not_converge_is_flagged_in_printed_tables_and_report(results_file, tmp_path, capsys):
    """A pymc-linear base stores r-hat and divergences per task; r-hat > 1.01 flags every pipeline on it."""
    from calibprob.cli import main

    tree = xr.open_datatree(results_file, engine="h5netcdf").load()
    tree.close()
    root = tree.to_dataset(inherit=False)
    coords = {k: root[k] for k in ("dataset", "repetition")}
    root["rhat"] = xr.DataArray([[1.003, 1.2, 1.004]], dims=("dataset", "repetition"), coords=coords)
    root["divergences"] = xr.DataArray([[0.0, 0.0, 0.0]], dims=("dataset", "repetition"), coords=coords)
    tree.dataset = root
    flagged = tmp_path / "flagged.nc"
    tree.to_netcdf(flagged, engine="h5netcdf")

    assert main(["report", str(flagged), "--html", str(tmp_path / "f.html")]) == 0
    printed = capsys.readouterr().out
    reason = "max r̂ 1.200 > 1.01 in 1 of 3 repetition(s)"
    note = f"! base not converged for vanilla, scaled, isotonic, J+: {reason}"
    # once under the scores table's heading and once under the ranking of the data set
    assert printed.count(note) == 2, printed
    assert re.search(r"\n\s+1\s+\S+.*best, ! base not converged\n", printed)
    assert "vanilla !" in printed and "J+ !" in printed

    text = (tmp_path / "f.html").read_text(encoding="utf-8")
    assert f'<p class="flag">{html.escape(note)}' in text
    # every ranked row (score and interval rankings) carries the marker; the r-hat row is marked
    assert len(re.findall(r'<tr class="flag">', text)) >= 3
    assert text.count("! base not converged</td>") >= 3
    assert re.search(r'<tr class="under"><td class="l">branin</td><td>1\.003</td>', text)
    p = Page()
    p.feed(text)
    assert p.h2 == list(HTML_SECTIONS)

    # converged: the same file with r-hat <= 1.01 prints no flag
    root["rhat"] = root["rhat"].clip(max=1.01)
    tree.dataset = root
    tree.to_netcdf(tmp_path / "ok.nc", engine="h5netcdf")
    assert main(["report", str(tmp_path / "ok.nc"), "--html", str(tmp_path / "ok.html")]) == 0
    assert "not converged" not in capsys.readouterr().out
    assert "not converged" not in (tmp_path / "ok.html").read_text(encoding="utf-8")
