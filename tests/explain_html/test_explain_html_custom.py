"""`npbert explain --html` for docs/custom_heads.md's heads, written by npbert.cli.explain.html_page
from the model object: the BERT walk, the head's own outputs as stages, and its loss term by term,
every check passing, with the numbers of the model itself and of torch's autograd on a twin."""
import os
import sys

import numpy as np
import pytest

import npbert
from npbert.cli import explain as cli_explain
from npbert.explain import TINY_CONFIG
from npbert.explain import decode

from test_explain_html import page_data, stage

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api"))
import custom_head_example as ex  # noqa: E402

TEXT = "the quick brown fox"                      # [CLS] the quick brown fox [SEP]: T = 6
LABELS = {"BertForMeanPooledRegression": {"labels": np.array([0.7])},
          "BertForSentenceAndTags": {"labels": np.array([1]), "tags": np.array([[-100, 0, 2, -100, 1, -100]])}}


@pytest.fixture(scope="module")
def page_classes(tmp_path_factory):
    return ex.page_module(str(tmp_path_factory.mktemp("page")))


@pytest.mark.parametrize("cls_name", sorted(LABELS))
def test_a_custom_heads_page_draws_its_outputs_and_loss_terms(cls_name, page_classes, tmp_path):
    config = npbert.BertConfig(**TINY_CONFIG)              # the built-in vocabulary's size
    model = getattr(page_classes, cls_name)(config, dtype=np.float64, seed=5).eval()
    labels = LABELS[cls_name]
    path = tmp_path / "page.html"
    status = cli_explain.html_page(str(path), model, text=TEXT, labels=labels, seed=1)
    _, data = page_data(path)
    assert status == 0 and data["checks"]["ok"], data["checks"]["failed"]
    out = model(**{"input_ids": np.array([data["input_ids"]]), "attention_mask": np.ones((1, 6), np.int64),
                   "token_type_ids": np.zeros((1, 6), np.int64)}, **labels)
    heads = [s for s in data["stages"] if s["section"] == "head"]
    names = [k for k, v in out.items() if k.endswith("logits")]
    assert [s["key"] for s in heads] == names and data["model"]["head"]["class"] == cls_name
    for s in heads:
        np.testing.assert_allclose(decode(s["value"]), out[s["key"]], rtol=0, atol=1e-6 * (1 + np.abs(out[s["key"]]).max()))
        assert s["source"]["file"].endswith("custom_heads_page.py") and s["check"]["backward"]["ok"]
    dout = model.head_loss.backward(1.0)
    for s in heads:                                   # d loss / d output as the page stores it (float32)
        np.testing.assert_allclose(decode(s["grad"]), dout[s["key"]], rtol=0, atol=1e-6 * (1 + np.abs(dout[s["key"]]).max()))
    assert data["loss"]["value"] == pytest.approx(float(out.loss), rel=1e-12)
    assert [(t["name"], t["weight"], t["count"]) for t in data["loss"]["terms"]] == [
        (t.name, t.weight, t.count) for t in model.head_loss.terms]
    assert all(ch["ok"] for ch in data["loss"]["checks"])
    assert data["gradient_check"]["of"] == cls_name and data["gradient_check"]["ok"]


def test_a_wrong_loss_gradient_fails_the_page(page_classes, tmp_path, monkeypatch):
    """The check of d loss / d outputs against central differences can fail: a loss op whose
    backward is off by a factor is caught."""
    import npbert.losses as L
    wrong = L.LossOp("mse", L.mse.forward, lambda d, cache: 1.5 * L.mse.backward(d, cache), L.mse.count)
    config = npbert.BertConfig(**TINY_CONFIG)
    model = page_classes.BertForMeanPooledRegression(config, dtype=np.float64, seed=5).eval()
    monkeypatch.setattr(type(model), "loss_terms",
                        lambda self, batch: [L.LossTerm("regression", "logits", wrong, batch["labels"])]
                        if batch.get("labels") is not None else [])
    status = cli_explain.html_page(str(tmp_path / "p.html"), model, text=TEXT, labels={"labels": np.array([0.7])})
    _, data = page_data(tmp_path / "p.html")
    assert status == 1 and "d loss / d outputs" in data["checks"]["failed"]
