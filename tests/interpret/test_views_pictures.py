"""bertviz's data (head_view / model_view / neuron view) and the pictures.

The views' data are checked for meaning without bertviz: the attention maps are the model's, the
queries and keys reproduce them (softmax(q k^T / sqrt(D)) of the neuron view's vectors is its
attention), and a pair's slices are the right blocks.  With bertviz installed, head_view and
model_view render it (a separate test, skipped without it)."""
import numpy as np
import pytest

import npbert.interpret as ni

from interpret_helpers import load_pair, tiny_checkpoint


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    pytest.importorskip("transformers")
    return load_pair(tiny_checkpoint(tmp_path_factory.mktemp("m"), seed=5), "BertForSequenceClassification")


def test_head_view_data_is_the_models_attention(pair):
    model, _, tok = pair
    data = ni.head_view_data(model, tok, "the cat sat", "it was tired", as_torch=False)
    enc = tok("the cat sat", "it was tired", return_tensors="np")
    expected = model(**enc, output_attentions=True).attentions
    assert data["tokens"] == tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    assert data["tokens"][data["sentence_b_start"] - 1] == "[SEP]" and data["sentence_b_start"] == 5
    assert len(data["attention"]) == 2 and all(np.array_equal(a, b) for a, b in zip(data["attention"], expected))
    assert ni.head_view_data(model, tok, "the cat sat", as_torch=False)["sentence_b_start"] is None


def test_neuron_view_data_queries_and_keys_give_its_attention(pair):
    model, _, tok = pair
    data = ni.neuron_view_data(model, tok, "the cat sat", "it was tired")
    assert set(data) == {"all", "aa", "bb", "ab", "ba"}
    T, D = len(data["all"]["left_text"]), model.config.hidden_size // model.config.num_attention_heads
    for layer in range(2):
        q = np.array(data["all"]["queries"][layer])                          # (N, T, D)
        k = np.array(data["all"]["keys"][layer])
        attn = np.array(data["all"]["attn"][layer])                          # (N, T, T)
        assert q.shape == k.shape == (4, T, D) and attn.shape == (4, T, T)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        softmax = np.exp(s - s.max(-1, keepdims=True))
        assert np.abs(softmax / softmax.sum(-1, keepdims=True) - attn).max() < 1e-12
        # sentence A = [CLS] the cat sat [SEP] (5 tokens), B = it was tired [SEP]
        assert np.array_equal(np.array(data["ab"]["attn"][layer]), attn[:, :5, 5:])
        assert np.array_equal(np.array(data["ba"]["queries"][layer]), q[:, 5:])
        assert np.array_equal(np.array(data["ba"]["keys"][layer]), k[:, :5])
    assert data["ab"]["left_text"] == data["all"]["left_text"][:5]
    assert data["ab"]["right_text"] == data["all"]["right_text"][5:]


def test_bertviz_renders_the_data(pair):
    bertviz = pytest.importorskip("bertviz")
    pytest.importorskip("torch")
    model, _, tok = pair
    data = ni.head_view_data(model, tok, "the cat sat", "it was tired")
    for view in (bertviz.head_view, bertviz.model_view):
        html = view(**data, html_action="return")
        assert "[SEP]" in html.data


def test_the_html_page_stands_alone(tmp_path):
    tokens = ["[CLS]", "<b>", "fine", "film", "[SEP]"]
    scores = np.array([0.0, -0.5, 1.0, 0.25, 0.0])
    page = ni.token_heatmap_html(tokens, {"ig": scores, "saliency": -scores}, str(tmp_path / "a.html"),
                                 title="a <test>", notes=["delta 1e-9"])
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == page
    for remote in ("http:", "https:", "<script", "src=", "@import", "url("):
        assert remote not in page
    assert "&lt;b&gt;" in page and "<b>" not in page.replace("<body>", "")   # tokens escaped
    assert "rgba(40,160,60,1.000)" in page                                  # the largest positive: full green
    assert "rgba(210,50,50,0.500)" in page                                  # -0.5 of 1: half red
    assert 'title="0.25"' in page
    with pytest.raises(ValueError, match="5 tokens but 4 scores for 'x'"):
        ni.token_heatmap_html(tokens, {"x": scores[:4]})


def test_the_pngs_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    curve = ni.PruningCurve([0, 4, 8], [0.5, 0.6, 0.9], [0.9, 0.8, 0.5], [(0, 0)] * 8)
    paths = [ni.token_heatmap_png(tokens, np.arange(4.0) - 1, str(tmp_path / "t.png"), title="t"),
             ni.relevance_map_png(np.eye(4), tokens, str(tmp_path / "r.png")),
             ni.head_importance_png(np.random.default_rng(0).random((2, 4)), str(tmp_path / "h.png")),
             ni.pruning_curve_png(curve, str(tmp_path / "p.png"))]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"the relevance map has shape \(3, 3\), 4 tokens need \(4, 4\)"):
        ni.relevance_map_png(np.eye(3), tokens, str(tmp_path / "x.png"))
