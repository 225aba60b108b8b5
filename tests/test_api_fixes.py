"""Issue 10's "found when tried as a new user would": each fixed behaviour, tested."""
import os
import warnings

import numpy as np
import pytest

import npbert
from heads.headhelpers import tiny_config


@pytest.fixture
def saved(tmp_path):
    model = npbert.BertForSequenceClassification(tiny_config(num_labels=2), dtype=np.float64)
    model.save_pretrained(str(tmp_path))
    return str(tmp_path)


def test_forward_defaults_come_from_the_config(saved):
    model = npbert.BertModel.from_pretrained(saved, dtype=np.float64, output_attentions=True,
                                             output_hidden_states=True)
    out = model(np.array([[2, 5, 7]]))                                   # positional, as torch
    assert len(out.attentions) == 2 and len(out.hidden_states) == 3
    # bertviz's outputs[-1] is the attentions, as in transformers
    assert out[-1] is out.attentions
    assert model(np.array([[2, 5, 7]]), output_attentions=False).attentions is None


def test_return_dict_false_gives_transformers_tuple(saved):
    model = npbert.BertForSequenceClassification.from_pretrained(saved, dtype=np.float64)
    logits = model(input_ids=np.array([[2, 5, 7]])).logits
    t = model(input_ids=np.array([[2, 5, 7]]), labels=np.array([1]), return_dict=False)
    assert isinstance(t, tuple) and len(t) == 2 and np.array_equal(t[1], logits)      # (loss, logits)
    model.config.return_dict = False
    assert isinstance(model(np.array([[2, 5, 7]])), tuple)
    with pytest.raises(TypeError, match="multiple values for argument 'input_ids'"):
        model(np.array([[1]]), input_ids=np.array([[1]]))


def test_from_pretrained_keywords_config_and_model_type(saved, tmp_path):
    with pytest.raises(TypeError, match="neither config fields nor loader options: \\['num_lables'\\]"):
        npbert.BertForSequenceClassification.from_pretrained(saved, num_lables=3)
    cfg = npbert.BertConfig.from_pretrained(saved)
    cfg.hidden_dropout_prob = 0.3
    model = npbert.BertForSequenceClassification.from_pretrained(saved, config=cfg)
    assert model.config.hidden_dropout_prob == 0.3
    import json
    d = json.load(open(os.path.join(saved, "config.json")))
    d["model_type"] = "roberta"
    json.dump(d, open(os.path.join(saved, "config.json"), "w"))
    with pytest.warns(UserWarning, match="describes a 'roberta' model"):
        npbert.BertForSequenceClassification.from_pretrained(saved)


def test_error_messages(saved, tmp_path):
    with pytest.raises(ValueError, match="(?s)shapes do not fit.*and \\d+ more tensors"):
        npbert.BertModel.from_pretrained(saved, hidden_size=16, num_attention_heads=2, intermediate_size=12)
    model = npbert.BertModel(tiny_config())
    model(input_ids=np.array([[2, 3]]))
    with pytest.raises(TypeError, match="BertModel.backward\\(\\) got gradients for \\['logits'\\].*last_hidden_state"):
        model.backward(logits=np.ones(2))
    f = tmp_path / "a_file"
    f.write_text("x")
    with pytest.raises(ValueError, match="that is a file"):
        model.save_pretrained(str(f))


def test_torch_style_methods():
    model = npbert.BertForMaskedLM(tiny_config())
    assert sum(p.size for p in model.parameters()) == model.num_parameters()
    names = [n for n, _ in model.named_modules()]
    assert names[:3] == ["", "bert", "bert.embeddings"] and "bert.encoder.layer.1.attention.self" in names
    emb = model.get_input_embeddings()
    assert emb.weight is model.state.params["bert.embeddings.word_embeddings.weight"]
    old = emb.weight.copy()
    model.resize_token_embeddings(40)
    assert model.get_input_embeddings().weight.shape == (40, model.config.hidden_size)
    assert np.array_equal(model.get_input_embeddings().weight[:len(old)], old)
    assert model.state.params["cls.predictions.bias"].shape == (40,) and model.config.vocab_size == 40
    out = model(input_ids=np.array([[39, 2]]), labels=np.array([[39, -100]]))
    assert out.logits.shape == (1, 2, 40) and np.isfinite(out.loss)
    text = repr(model)
    assert text.startswith("BertForMaskedLM(\n  (bert): BertModel(")
    assert "(word_embeddings): Embedding(40, " in text and "(0-1): 2 x BertLayer(" in text


def test_pairs_get_token_type_ids_by_default_and_ragged_arrays_raise(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]) + "\n")
    tok = npbert.BertTokenizer(str(tmp_path / "vocab.txt"))
    enc = tok("a b", "c")
    assert enc["token_type_ids"] == [0, 0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="padding=True"):
        tok(["a b", "a b c"], return_tensors="np")
    assert tok(["a b", "a b c"], padding=True, return_tensors="np")["input_ids"].shape == (2, 5)
