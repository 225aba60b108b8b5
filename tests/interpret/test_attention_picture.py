"""The attention picture can be read: one colour bar for every map, no two labels drawn over each
other, the token names where they fit; CJK tokens drawn with a font that has them, or a warning
saying there is none."""
import itertools
import warnings

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from npbert.interpret import attention_picture  # noqa: E402


def attentions(L, N, T, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(L):
        a = rng.random((1, N, T, T))
        out.append(a / a.sum(-1, keepdims=True))
    return out


def drawn(monkeypatch, tmp_path, *args, **kwargs):
    """(figure, path): the figure plot_attention drew, kept from being closed."""
    import matplotlib.pyplot as plt
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    path = attention_picture.plot_attention(*args, path=str(tmp_path / "a.png"), **kwargs)
    return kept[-1], path


def texts_overlap(fig):
    """Pairs of visible, non-empty texts whose boxes intersect (in pixels), as the figure was saved."""
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        for t in [ax.title, ax.xaxis.label, ax.yaxis.label] + ax.get_xticklabels() + ax.get_yticklabels():
            if t.get_visible() and t.get_text().strip():
                boxes.append((t.get_text(), t.get_window_extent(renderer)))
    if fig._suptitle is not None:
        boxes.append((fig._suptitle.get_text(), fig._suptitle.get_window_extent(renderer)))
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
            if ba.overlaps(bb) and ba.intersection(ba, bb).width > 1 and ba.intersection(ba, bb).height > 1]


def test_the_grid_has_one_colour_bar_and_no_overlapping_labels(monkeypatch, tmp_path):
    tokens = ["[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "[SEP]"]
    # 12 heads as all-MiniLM-L6-v2 and BERT-base have (the width that crowds labels); 3 of the layers
    fig, path = drawn(monkeypatch, tmp_path, attentions(3, 12, len(tokens)), tokens, title="the quick brown fox")
    assert path.endswith("a.png")
    images = [ax for ax in fig.axes if ax.images]
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "attention probability"]
    assert len(images) == 3 * 12 and len(bars) == 1 and len(fig.axes) == 3 * 12 + 1   # 36 maps, one colour bar
    assert all(ax.images[0].get_clim() == (0.0, 1.0) for ax in images)                # on one scale
    assert not texts_overlap(fig), texts_overlap(fig)[:5]
    labelled = [ax for ax in images if any(t.get_text() for t in ax.get_yticklabels())]
    assert len(labelled) == 3                                       # token names on the left column only


def test_one_head_large_names_every_token(monkeypatch, tmp_path):
    tokens = [f"tok{k}" for k in range(30)]
    fig, _ = drawn(monkeypatch, tmp_path, attentions(2, 4, 30), tokens, title="x", layer=1, head=2)
    ax = next(a for a in fig.axes if a.images and a.get_title())
    assert ax.get_title() == "layer 1, head 2"
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert not texts_overlap(fig), texts_overlap(fig)[:5]


def test_too_many_tokens_for_the_grid_cells_leaves_names_out_and_says_where_to_see_them(monkeypatch, tmp_path):
    tokens = [f"t{k}" for k in range(60)]
    fig, _ = drawn(monkeypatch, tmp_path, attentions(2, 4, 60), tokens, title="long")
    assert not any(t.get_text() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()
                   if ax.get_ylabel() != "attention probability")
    assert "--layer L --head H" in fig._suptitle.get_text()


def test_cjk_tokens_use_a_cjk_font_or_say_there_is_none(monkeypatch, tmp_path):
    tokens = ["[CLS]", "孩", "子", "[SEP]"]
    monkeypatch.setattr(attention_picture, "cjk_font", lambda: None)
    with pytest.warns(UserWarning, match="no installed font has their glyphs"):
        attention_picture.font_families(tokens)
    monkeypatch.setattr(attention_picture, "cjk_font", lambda: "Some CJK Font")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert attention_picture.font_families(tokens) == ["DejaVu Sans", "Some CJK Font"]
        assert attention_picture.font_families(["[CLS]", "hello"]) == ["DejaVu Sans"]   # no CJK, no lookup


def test_the_cjk_font_found_has_the_glyphs():
    name = attention_picture.cjk_font()
    if name is None:
        pytest.skip("no CJK font installed here: the warning path is tested above")
    import matplotlib.font_manager as fm
    path = fm.findfont(fm.FontProperties(family=name), fallback_to_default=False)
    assert attention_picture._has_glyph(path, "中") and not name.startswith("Last Resort")
