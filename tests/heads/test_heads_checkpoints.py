"""Names, counts and checkpoints of the heads: state_dict() and backward() keys as
transformers' state_dict() / named_parameters(), parameter counts, a BertModel checkpoint into
every head (head fresh, with a warning), a BertForPreTraining checkpoint into BertModel (heads
dropped, with a warning), and save_pretrained read back by transformers."""
import warnings

import numpy as np
import pytest

import npbert
from npbert.modeling.pretrained import _no_init

from head_helpers import REL_TOL, assert_close, hf_model, randomize, t, tiny_config

HEADS = ["BertForPreTraining", "BertForMaskedLM", "BertLMHeadModel", "BertForNextSentencePrediction",
         "BertForSequenceClassification", "BertForTokenClassification", "BertForMultipleChoice",
         "BertForQuestionAnswering"]
HEAD_KEYS = {   # the parameters a BertModel checkpoint does not have
    "BertForPreTraining": ["cls.predictions.bias", "cls.predictions.transform.dense.weight",
                           "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
                           "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
                           "cls.seq_relationship.bias"],
    "BertForMaskedLM": ["cls.predictions.bias", "cls.predictions.transform.dense.weight",
                        "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
                        "cls.predictions.transform.LayerNorm.bias"],
    "BertForNextSentencePrediction": ["cls.seq_relationship.weight", "cls.seq_relationship.bias"],
    "BertForSequenceClassification": ["classifier.weight", "classifier.bias"],
    "BertForTokenClassification": ["classifier.weight", "classifier.bias"],
    "BertForMultipleChoice": ["classifier.weight", "classifier.bias"],
    "BertForQuestionAnswering": ["qa_outputs.weight", "qa_outputs.bias"],
}
HEAD_KEYS["BertLMHeadModel"] = HEAD_KEYS["BertForMaskedLM"]
NO_POOLER = {"BertForMaskedLM", "BertLMHeadModel", "BertForTokenClassification", "BertForQuestionAnswering"}


def _config(cls_name):
    return tiny_config(is_decoder=True) if cls_name == "BertLMHeadModel" else tiny_config()


def _inputs(cls_name):
    rng = np.random.default_rng(0)
    shape = (2, 3, 6) if cls_name == "BertForMultipleChoice" else (2, 6)
    return dict(input_ids=rng.integers(1, 29, size=shape), attention_mask=np.ones(shape, dtype=np.int64))


def _main_outputs(cls_name):
    return {"BertForPreTraining": ("prediction_logits", "seq_relationship_logits"),
            "BertForQuestionAnswering": ("start_logits", "end_logits")}.get(cls_name, ("logits",))


# ---- names and counts ---------------------------------------------------------------------
@pytest.mark.parametrize("cls_name", HEADS)
def test_state_dict_and_gradient_keys_are_transformers(cls_name):
    """state_dict() has exactly transformers' state_dict() keys (both names of a tied weight,
    the same array under both); backward() has exactly named_parameters(), in order."""
    pytest.importorskip("torch")
    ours = npbert.__dict__[cls_name](_config(cls_name), dtype=np.float64)
    theirs = hf_model(cls_name, _config(cls_name))
    assert set(ours.state_dict()) == set(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert ours.num_parameters() == theirs.num_parameters()
    sd = ours.state_dict()
    if "cls.predictions.decoder.weight" in sd:
        assert sd["cls.predictions.decoder.weight"] is sd["bert.embeddings.word_embeddings.weight"]
        assert sd["cls.predictions.decoder.bias"] is sd["cls.predictions.bias"]
    out = ours(**_inputs(cls_name))
    grads = ours.backward(**{name: np.ones_like(getattr(out, name)) for name in _main_outputs(cls_name)})
    assert list(grads) == [n for n, _ in theirs.named_parameters()]


def test_parameter_counts_at_bert_base_size():
    """BertModel 109,482,240 and BertForPreTraining 110,106,428 (what transformers reports for
    bert-base-uncased; the difference is cls.predictions.bias 30,522 + transform 590,592 + 1,536
    + seq_relationship 1,538).  Counted on models built with _no_init(), whose zero arrays are
    never touched, so nothing is drawn and little is allocated."""
    config = npbert.BertConfig()
    with _no_init():
        assert npbert.BertModel(config).num_parameters() == 109_482_240
        assert npbert.BertForPreTraining(config).num_parameters() == 110_106_428
        counts = {name: npbert.__dict__[name](npbert.BertConfig(is_decoder=name == "BertLMHeadModel")).num_parameters()
                  for name in HEADS}
    torch = pytest.importorskip("torch")
    import transformers
    with torch.device("meta"):   # transformers' own counts, without allocating
        for name, n in counts.items():
            tcfg = transformers.BertConfig(is_decoder=name == "BertLMHeadModel")
            assert getattr(transformers, name)(tcfg).num_parameters() == n, name


# ---- loading across classes ---------------------------------------------------------------
def _save_base(tmp_path, config):
    base = randomize(npbert.BertModel(config, dtype=np.float64), seed=3)
    base.save_pretrained(tmp_path / "base")
    return base


@pytest.mark.parametrize("cls_name", HEADS)
def test_bertmodel_checkpoint_into_every_head(tmp_path, cls_name):
    """The encoder is loaded, the head is initialised fresh and named in a warning; a head
    without a pooler also warns that the checkpoint's pooler was not used."""
    config = _config(cls_name)
    base = _save_base(tmp_path, config)
    with pytest.warns(UserWarning) as record:
        model = npbert.__dict__[cls_name].from_pretrained(tmp_path / "base", dtype=np.float64)
    messages = " ".join(str(w.message) for w in record)
    assert "newly initialized" in messages
    for key in HEAD_KEYS[cls_name]:
        assert key in messages
    if cls_name in NO_POOLER:
        assert "not used" in messages and "pooler.dense.weight" in messages
    for name, value in base.state_dict().items():
        if ("bert." + name) in model.state.params:
            np.testing.assert_array_equal(model.state.params["bert." + name], value)
    # the fresh head is transformers' init: biases zero, weights N(0, initializer_range)
    for key in HEAD_KEYS[cls_name]:
        p = model.state.params[key]
        if key.endswith("bias") and "LayerNorm" not in key:
            assert not p.any(), key
    # and the model runs
    model(**_inputs(cls_name))


def test_pretraining_checkpoint_into_bertmodel(tmp_path):
    config = tiny_config()
    full = randomize(npbert.BertForPreTraining(config, dtype=np.float64), seed=4)
    full.save_pretrained(tmp_path / "pt")
    with pytest.warns(UserWarning, match="not used") as record:
        base = npbert.BertModel.from_pretrained(tmp_path / "pt", dtype=np.float64)
    messages = " ".join(str(w.message) for w in record)
    for key in HEAD_KEYS["BertForPreTraining"]:
        assert key in messages
    assert "newly initialized" not in messages
    for name, value in base.state.params.items():
        np.testing.assert_array_equal(value, full.state.params["bert." + name])


@pytest.mark.parametrize("cls_name", HEADS)
def test_same_class_round_trip_has_no_warning(tmp_path, cls_name):
    model = randomize(npbert.__dict__[cls_name](_config(cls_name), dtype=np.float64), seed=5)
    model.save_pretrained(tmp_path / "m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = npbert.__dict__[cls_name].from_pretrained(tmp_path / "m", dtype=np.float64)
    for name, value in model.state.params.items():
        np.testing.assert_array_equal(again.state.params[name], value)


@pytest.mark.parametrize("cls_name", HEADS)
def test_save_pretrained_loads_in_transformers(tmp_path, cls_name):
    """transformers' from_pretrained finds no missing and no unexpected key, and computes the
    same outputs (float64 both: REL_TOL as in the comparison tests)."""
    torch = pytest.importorskip("torch")
    import transformers
    overrides = dict(num_labels=3) if cls_name in ("BertForSequenceClassification", "BertForTokenClassification") else {}
    config = tiny_config(is_decoder=cls_name == "BertLMHeadModel", **overrides)
    ours = randomize(npbert.__dict__[cls_name](config, dtype=np.float64), seed=6)
    ours.save_pretrained(tmp_path / "m")
    theirs, info = getattr(transformers, cls_name).from_pretrained(
        tmp_path / "m", output_loading_info=True, dtype=torch.float64, attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    theirs.eval()
    inputs = _inputs(cls_name)
    out = ours(**inputs)
    with torch.no_grad():
        tout = theirs(**{k: t(v) for k, v in inputs.items()})
    for name in _main_outputs(cls_name):
        assert_close(getattr(out, name), getattr(tout, name).numpy(), name, REL_TOL)
