"""The `npbert explain --html` page in a real browser: headless Chromium (Debian's `chromium`) opens
it from file://, the page's script draws every stage and writes #npbert-status (what was drawn,
how many canvases came out blank, the errors it caught); with #selftest in the address it also
changes the layer, the head and the query token through the selectors, as a reader would, and
says whether the attention view changed.  Skips when no Chromium is installed."""
import re
import shutil
import subprocess
import time

import pytest

from npbert import cli

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on PATH (Debian: apt-get install chromium): the page is not opened in a browser")


def open_page(browser, path, profile, fragment="", screenshot=None):
    """Chromium's DOM after the page's script ran (or a screenshot); returns (dom, stderr, seconds)."""
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions", "--no-first-run",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--window-size=1300,2400",
            "--virtual-time-budget=30000"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    start = time.perf_counter()
    result = subprocess.run(args + [path.as_uri() + fragment], capture_output=True, text=True, timeout=300)
    return result.stdout, result.stderr, time.perf_counter() - start


def status(dom):
    m = re.search(r'<div id="npbert-status"([^>]*)>([^<]*)</div>', dom)
    assert m, "no #npbert-status in the DOM:\n" + dom[-2000:]
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1)))
    return attrs, m.group(2)


def assert_drawn(dom, stderr, n_cards):
    attrs, text = status(dom)
    assert attrs["state"] == "ok", text
    assert attrs["errors"] == "0" and attrs["blank"] == "0", text
    assert "Uncaught" not in stderr, stderr[-3000:]
    cards = re.findall(r'<div class="stage" id="stage-[^"]+">(.*?)(?=<div class="stage" id=|</div>\s*<h2|$)', dom, re.S)
    assert len(cards) == n_cards
    for card in cards:                        # forward and gradient, each a drawn canvas
        assert len(re.findall(r'<canvas class="map"[^>]*data-signature="\d+"', card)) >= 2, card[:300]
    return attrs


@pytest.fixture(scope="module")
def pair_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain_browser") / "pair.html"
    assert cli.main(["explain", "--random", "--html", str(path), "--text", "the quick brown fox",
                     "--text_pair", "a lazy dog ."]) == 0
    return path


def attention_signature(dom):
    m = re.search(r'<div class="stage" id="stage-layer-probs">.*?<canvas class="map"[^>]*data-signature="(\d+)"', dom, re.S)
    return m.group(1)


def test_the_page_draws_and_its_selectors_work(browser, pair_page, tmp_path):
    dom, stderr, _ = open_page(browser, pair_page, tmp_path / "profile", "#selftest=1")
    attrs = assert_drawn(dom, stderr, n_cards=5 + 12 + 3)
    assert attrs["layer-changes"] == "true"     # another layer redraws the attention map differently
    assert attrs["head-changes"] == "true"      # ... and so does another head
    assert attrs["token-changes"] == "true"     # another query token shows another row
    assert 'id="attention-row"' in dom


def test_the_address_chooses_layer_and_head(browser, pair_page, tmp_path):
    first, _, _ = open_page(browser, pair_page, tmp_path / "p1", "#layer=0&head=0")
    other, _, _ = open_page(browser, pair_page, tmp_path / "p2", "#layer=1&head=3")
    query = '<code class="module">encoder.layer.{}.attention.self.query</code>'
    assert query.format(1) in other and query.format(0) in first and query.format(1) not in first
    assert attention_signature(first) != attention_signature(other)


def test_minilm_page_opens_quickly(browser, minilm_page, tmp_path):
    path, status_code, _ = minilm_page
    assert status_code == 0
    dom, stderr, seconds = open_page(browser, path, tmp_path / "profile", "#selftest=1")
    attrs = assert_drawn(dom, stderr, n_cards=5 + 12 + 3)
    assert attrs["layer-changes"] == "true" and attrs["head-changes"] == "true"
    print(f"MiniLM page opened and drawn by headless Chromium in {seconds:.1f} s")
    # A few seconds on an idle machine; the bound leaves room for a loaded CI runner.
    assert seconds < 60
    png = tmp_path / "page.png"
    open_page(browser, path, tmp_path / "profile2", screenshot=png)
    assert png.stat().st_size > 50_000             # a drawn page, not a blank one (a blank PNG is ~10 kB)


@pytest.mark.parametrize("cls_name, text, argv, cards, heads", [
    ("BertForTokenClassification", "the quick brown fox", ["--label=-100,0,1,2,0,-100"], 5 + 12 + 1, ["logits"]),
    ("BertForQuestionAnswering", "the quick brown fox", ["--label", "2,4"], 5 + 12 + 2, ["start_logits", "end_logits"]),
    ("BertForSequenceClassification", "the quick brown fox", [], 5 + 12 + 3 + 1, ["logits"]),
])
def test_a_heads_outputs_draw(browser, cls_name, text, argv, cards, heads, tmp_path):
    """The head's output stages, with a label (the loss's gradient beside them) and without (zeros)."""
    from test_explain_html_heads import head_folder
    path = tmp_path / "head.html"
    assert cli.main(["explain", "--model", str(head_folder(tmp_path, cls_name)), "--html", str(path), "--text", text,
                     *argv]) == 0
    dom, stderr, _ = open_page(browser, path, tmp_path / "profile", "#selftest=1")
    attrs = assert_drawn(dom, stderr, n_cards=cards)
    assert attrs["layer-changes"] == "true" and attrs["head-changes"] == "true"
    for key in heads:
        card = re.search(rf'<div class="stage" id="stage-head-{key}">(.*?)(?=<div class="stage" id=|</div>\s*<h2|$)',
                         dom, re.S).group(1)
        assert f"({cls_name})" in card and 'class="dim"' in card
        signatures = re.findall(r'<canvas class="map"[^>]*data-signature="(\d+)"', card)
        assert len(signatures) == 2
        nums = re.findall(r'<div class="nums">([^<]*)</div>', card)      # forward, gradient
        assert len(nums) == 2 and "std 0 " not in nums[0]
        # a label: d loss / d output, which varies; without one the loss does not read the head: all 0
        assert ("std 0 " in nums[1]) != bool(argv), nums[1]
    assert ('data-tensor="upstream.last_hidden_state"' in dom) == bool(argv)
    assert ('data-tensor="U"' in dom) != bool(argv)
