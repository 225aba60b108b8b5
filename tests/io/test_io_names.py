"""match_state_dict: prefix in/out, gamma/beta, position_ids, tied decoder,
shape mismatches; checked against transformers' own parameter names."""
import numpy as np
import pytest

from npbert.io import match_state_dict
from npbert.io.names import google_to_hf

from io_helpers import expected_shapes, tiny_hf_model, torch_state_dict_numpy


def strip(d, prefix="bert."):
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in d.items()}


def test_head_checkpoint_into_same_head_is_exact():
    model = tiny_hf_model("BertForPreTraining")
    sd, exp = torch_state_dict_numpy(model), expected_shapes(model)
    r = match_state_dict(sd, exp)
    assert r.missing == [] and r.unexpected == [] and r.mismatched == []
    assert sorted(r.state_dict) == sorted(exp)
    # the tied decoder weight and decoder.bias are silently ignored
    assert sorted(r.ignored) == ["cls.predictions.decoder.bias", "cls.predictions.decoder.weight"]
    for k in exp:
        assert r.state_dict[k] is sd[k]


def test_base_checkpoint_into_head_class_adds_prefix_and_reports_head_missing():
    base = tiny_hf_model("BertModel")
    head = tiny_hf_model("BertForSequenceClassification")
    sd = torch_state_dict_numpy(base)
    r = match_state_dict(sd, expected_shapes(head))
    assert sorted(r.missing) == ["classifier.bias", "classifier.weight"]
    assert r.unexpected == [] and r.mismatched == []
    assert r.renamed["embeddings.word_embeddings.weight"] == "bert.embeddings.word_embeddings.weight"
    assert np.array_equal(r.state_dict["bert.pooler.dense.weight"], sd["pooler.dense.weight"])


def test_head_checkpoint_into_base_class_strips_prefix_and_reports_heads_unexpected():
    head = tiny_hf_model("BertForPreTraining")
    base = tiny_hf_model("BertModel")
    r = match_state_dict(torch_state_dict_numpy(head), expected_shapes(base))
    assert r.missing == [] and r.mismatched == []
    assert sorted(r.unexpected) == sorted(
        ["cls.predictions.bias", "cls.predictions.transform.dense.weight",
         "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
         "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
         "cls.seq_relationship.bias", "cls.predictions.decoder.bias"])
    assert sorted(r.state_dict) == sorted(expected_shapes(base))


def test_unprefixed_head_checkpoint_gamma_beta_and_position_ids():
    model = tiny_hf_model("BertForMaskedLM")
    exp = expected_shapes(model)
    legacy = {}
    for k, v in strip(torch_state_dict_numpy(model)).items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy[k] = v
    legacy["embeddings.position_ids"] = np.arange(24)[None]
    r = match_state_dict(legacy, exp)
    assert r.missing == [] and r.unexpected == [] and r.mismatched == []
    assert "embeddings.position_ids" in r.ignored
    assert r.renamed["embeddings.LayerNorm.gamma"] == "bert.embeddings.LayerNorm.weight"
    assert r.renamed["cls.predictions.transform.LayerNorm.beta"] == "cls.predictions.transform.LayerNorm.bias"


def test_decoder_bias_is_used_when_predictions_bias_is_absent():
    model = tiny_hf_model("BertForMaskedLM")
    sd = torch_state_dict_numpy(model)
    bias = sd.pop("cls.predictions.bias")
    r = match_state_dict(sd, expected_shapes(model))
    assert r.missing == []
    assert r.state_dict["cls.predictions.bias"] is sd["cls.predictions.decoder.bias"]
    assert np.array_equal(r.state_dict["cls.predictions.bias"], bias)


def test_decoder_bias_without_any_lm_head_is_unexpected():
    r = match_state_dict({"cls.predictions.decoder.bias": np.zeros(3)}, {"x": (1,)})
    assert r.unexpected == ["cls.predictions.decoder.bias"] and r.missing == ["x"]


def test_mismatched_shapes_are_reported_not_loaded():
    model = tiny_hf_model("BertForSequenceClassification")
    sd = torch_state_dict_numpy(model)
    sd["classifier.weight"] = np.zeros((5, 8), np.float32)
    r = match_state_dict(sd, expected_shapes(model))
    assert r.mismatched == [("classifier.weight", (5, 8), (2, 8))]
    assert "classifier.weight" not in r.state_dict and "classifier.weight" not in r.missing


def test_exact_name_wins_over_renamed_duplicate():
    exp = {"bert.pooler.dense.bias": (2,)}
    exact, other = np.ones(2), np.zeros(2)
    r = match_state_dict({"pooler.dense.bias": other, "bert.pooler.dense.bias": exact}, exp)
    assert r.state_dict["bert.pooler.dense.bias"] is exact
    assert r.unexpected == ["pooler.dense.bias"]


def test_untied_decoder_weight_is_matched_when_expected():
    exp = {"cls.predictions.decoder.weight": (3, 2)}
    w = np.ones((3, 2))
    r = match_state_dict({"cls.predictions.decoder.weight": w}, exp)
    assert r.state_dict["cls.predictions.decoder.weight"] is w and r.ignored == []


@pytest.mark.parametrize("google, hf, transpose", [
    ("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", False),
    ("bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", False),
    ("bert/encoder/layer_11/attention/self/query/kernel",
     "bert.encoder.layer.11.attention.self.query.weight", True),
    ("bert/encoder/layer_0/output/LayerNorm/beta", "bert.encoder.layer.0.output.LayerNorm.bias", False),
    ("bert/pooler/dense/kernel", "bert.pooler.dense.weight", True),
    ("cls/predictions/output_bias", "cls.predictions.bias", False),
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", True),
    ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", False),
    ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias", False),
])
def test_google_names(google, hf, transpose):
    assert google_to_hf(google) == (hf, transpose)


@pytest.mark.parametrize("name", ["bert/encoder/layer_0/attention/self/query/kernel/adam_m",
                                  "bert/pooler/dense/bias/adam_v", "global_step"])
def test_google_optimizer_state_is_skipped(name):
    assert google_to_hf(name) is None
