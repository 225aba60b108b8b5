"""from_pretrained's config=, warnings and refusals; error messages a new user meets (issue 10)."""
import json
import warnings

import numpy as np
import pytest

import npbert

KW = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
          intermediate_size=24, max_position_embeddings=16)


@pytest.fixture
def saved(tmp_path):
    npbert.BertModel(npbert.BertConfig(**KW), dtype=np.float64).save_pretrained(str(tmp_path))
    return str(tmp_path)


def test_from_pretrained_with_a_config_object(saved):
    cfg = npbert.BertConfig.from_pretrained(saved, output_hidden_states=True, hidden_dropout_prob=0.0)
    model = npbert.BertModel.from_pretrained(saved, config=cfg)
    assert model.config.hidden_dropout_prob == 0.0
    assert len(model(input_ids=np.array([[2, 3, 4]])).hidden_states) == 3
    # a config object plus overrides: the overrides win, the given object is not modified
    model = npbert.BertModel.from_pretrained(saved, config=cfg, output_hidden_states=False)
    assert model(input_ids=np.array([[2, 3]])).hidden_states is None and cfg.output_hidden_states is True


def test_unknown_keyword_is_refused(saved):
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) \['output_attention'\]"):
        npbert.BertModel.from_pretrained(saved, output_attention=True)          # the typo must not pass
    # config fields and constructor options pass
    m = npbert.BertModel.from_pretrained(saved, num_labels=3, add_pooling_layer=False)
    assert m.pooler is None and m.config.num_labels == 3


def test_foreign_model_type_warns(saved, tmp_path):
    path = tmp_path / "config.json"
    d = json.loads(path.read_text())
    d["model_type"] = "roberta"
    path.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match="model_type='roberta'"):
        npbert.BertModel.from_pretrained(saved)
    d["model_type"] = "bert"
    path.write_text(json.dumps(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        npbert.BertModel.from_pretrained(saved)


def test_shape_mismatch_names_a_few_tensors_and_counts_the_rest(saved):
    with pytest.raises(ValueError) as e:
        npbert.BertModel.from_pretrained(saved, hidden_size=32, intermediate_size=24)
    text = str(e.value)
    assert text.count("checkpoint (") == 5, text
    assert "more tensors" in text and len(text.split("\n")) <= 8


def test_backward_with_a_wrong_name_names_backward_and_the_outputs():
    m = npbert.BertModel(npbert.BertConfig(**KW), dtype=np.float64)
    out = m(input_ids=np.array([[2, 3, 4]]))
    with pytest.raises(TypeError) as e:
        m.backward(logits=np.ones_like(out.last_hidden_state))
    assert "BertModel.backward()" in str(e.value) and "_backward" not in str(e.value)
    assert "last_hidden_state" in str(e.value) and "pooler_output" in str(e.value)
    m.backward(last_hidden_state=np.ones_like(out.last_hidden_state))       # the forward is still usable


def test_save_pretrained_onto_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="existing file"):
        npbert.BertModel(npbert.BertConfig(**KW)).save_pretrained(str(target))
