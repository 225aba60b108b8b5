"""Bad input to npbert.interpret: a clear error naming what was wrong, never a silent answer."""
import re

import numpy as np
import pytest

import npbert
import npbert.interpret as ni

from interpret_helpers import TINY

ENC = {"input_ids": np.array([[2, 13, 14, 3]]), "special_tokens_mask": np.array([[1, 0, 0, 1]])}


def make(cls_name, **overrides):
    return getattr(npbert, cls_name)(npbert.BertConfig(**{**TINY, **overrides}), dtype=np.float64).eval()


@pytest.fixture(scope="module")
def classifier():
    return make("BertForSequenceClassification", num_labels=3)


@pytest.mark.parametrize("target,message", [
    (3, "target: class 3 is out of range: logits has 3 classes (0..2)"),
    (-1, "target: class -1 is out of range"),
    ([0, 1], "target is a list of 2, the inputs have 1 examples"),
    ((0, 1), "target (0, 1) has the wrong form"),
    (None, "a target is needed for BertForSequenceClassification"),
])
def test_a_wrong_classification_target(classifier, target, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        ni.saliency(classifier, ENC, target)


def test_wrong_targets_of_the_other_heads():
    qa = make("BertForQuestionAnswering")
    with pytest.raises(ValueError, match=re.escape("target: position 4 is out of range: the inputs have 4 tokens")):
        ni.saliency(qa, ENC, ("start", 4))
    with pytest.raises(ValueError, match="target for BertForQuestionAnswering is \\('start' \\| 'end', position\\)"):
        ni.saliency(qa, ENC, ("middle", 1))
    mlm = make("BertForMaskedLM")
    with pytest.raises(ValueError, match=re.escape(f"target: token id {TINY['vocab_size']} is out of range")):
        ni.saliency(mlm, ENC, (1, TINY["vocab_size"]))
    base = make("BertModel")
    with pytest.raises(ValueError, match=re.escape("the upstream gradient for last_hidden_state has shape (1, 4, 3)")):
        ni.saliency(base, ENC, np.ones((1, 4, 3)))
    with pytest.raises(ValueError, match="the model has no output 'logits'"):
        ni.saliency(base, ENC, {"logits": np.ones((1, 2))})
    with pytest.raises(TypeError, match="does not handle BertForMultipleChoice"):
        ni.saliency(make("BertForMultipleChoice"), ENC, 0)


@pytest.mark.parametrize("layer,message", [
    ("bert.encoder.layer.2", "layer 'bert.encoder.layer.2' does not exist in BertForSequenceClassification: use one "
                             "of 'bert.embeddings.word_embeddings', 'bert.embeddings'"),
    ("bert.pooler", "layer 'bert.pooler' does not exist"),
    ("bert.encoder.layer.0", "layer 'bert.encoder.layer.0' cannot be used here"),
])
def test_a_layer_that_does_not_exist_or_does_not_fit(classifier, layer, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ni.integrated_gradients(classifier, ENC, 0, layer=layer, n_steps=2)


def test_conductance_layer_names(classifier):
    with pytest.raises(ValueError, match=re.escape("layer 'bert.embeddings' cannot be used here: use one of "
                                                   "'bert.encoder.layer.0', 'bert.encoder.layer.1'")):
        ni.layer_conductance(classifier, ENC, 0, "bert.embeddings", n_steps=2)
    with pytest.raises(ValueError, match="layer 'bert.encoder.layer.7' does not exist"):
        ni.layer_conductance(classifier, ENC, 0, "bert.encoder.layer.7", n_steps=2)


@pytest.mark.parametrize("baselines,message", [
    (np.zeros((1, 5), dtype=np.int64), "baselines of token ids have shape (1, 5); the inputs need (1, 4), (4,)"),
    (np.zeros((4, TINY["hidden_size"] + 1)), "baselines of floats are the layer's output and have shape (4, 17)"),
    (np.array([[0, 1, 2, 99]]), "baselines hold token ids outside [0, 39) (vocab_size)"),
    (np.array(["a"]), "baselines must be token ids or floats"),
])
def test_a_baseline_of_the_wrong_shape(classifier, baselines, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        ni.integrated_gradients(classifier, ENC, 0, baselines=baselines, n_steps=2)


def test_good_baselines_of_every_form_run(classifier):
    """One id row for all, a single id, the layer's output as floats: the attributions of the first
    two equal the (B, T) form's."""
    full = ni.integrated_gradients(classifier, ENC, 0, baselines=np.array([[2, 0, 0, 3]]), n_steps=3)
    row = ni.integrated_gradients(classifier, ENC, 0, baselines=np.array([2, 0, 0, 3]), n_steps=3)
    assert np.array_equal(full.attributions, row.attributions)
    zeros = ni.integrated_gradients(classifier, ENC, 0, baselines=np.zeros((4, 16)), n_steps=3)
    assert zeros.attributions.shape == (1, 4, 16)
    single = ni.integrated_gradients(classifier, ENC, 0, baselines=0, n_steps=3)
    padded = ni.integrated_gradients(classifier, ENC, 0, baselines=np.zeros((1, 4), dtype=np.int64), n_steps=3)
    assert np.array_equal(single.attributions, padded.attributions)


@pytest.mark.parametrize("kwargs,message", [
    (dict(n_steps=0), "n_steps=0: gausslegendre needs n_steps >= 1"),
    (dict(n_steps=-3, method="riemann_middle"), "n_steps=-3: riemann_middle needs n_steps >= 2"),
    (dict(n_steps=1, method="riemann_left"), "n_steps=1: riemann_left needs n_steps >= 2"),
    (dict(method="simpson"), "unknown integration method 'simpson': use one of riemann_left"),
    (dict(internal_batch_size=0), "internal_batch_size must be a positive integer or None, got 0"),
])
def test_bad_integration_arguments(classifier, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ni.integrated_gradients(classifier, ENC, 0, **kwargs)


def test_conductance_needs_a_step(classifier):
    with pytest.raises(ValueError, match=re.escape("n_steps=0: gausslegendre needs n_steps >= 1")):
        ni.layer_conductance(classifier, ENC, 0, "bert.encoder.layer.1", n_steps=0)
    with pytest.raises(ValueError, match="unknown integration method 'left'"):
        ni.layer_conductance(classifier, ENC, 0, "bert.encoder.layer.1", method="left")


def test_bad_inputs_and_a_missing_baseline_rule(classifier):
    with pytest.raises(ValueError, match="inputs must hold input_ids"):
        ni.saliency(classifier, {"attention_mask": np.ones((1, 4))}, 0)
    with pytest.raises(ValueError, match="not inputs_embeds"):
        ni.saliency(classifier, {"input_ids": ENC["input_ids"], "inputs_embeds": np.ones((1, 4, 16))}, 0)
    with pytest.raises(ValueError, match=re.escape("inputs['attention_mask'] has shape (1, 3), input_ids has (1, 4)")):
        ni.saliency(classifier, {"input_ids": ENC["input_ids"], "attention_mask": np.ones((1, 3), dtype=int)}, 0)
    with pytest.raises(ValueError, match="needs to know which tokens are special: pass tokenizer="):
        ni.integrated_gradients(classifier, {"input_ids": ENC["input_ids"]}, 0, n_steps=2)


def test_the_model_is_left_as_it_was(classifier):
    """Training mode and a frozen set survive an attribution (it runs in eval, nothing trainable)."""
    classifier.train().freeze("bert.embeddings")
    try:
        ni.integrated_gradients(classifier, ENC, 0, n_steps=2)
        assert classifier.training
        assert not classifier.is_trainable("bert.embeddings.LayerNorm.weight")
        assert classifier.is_trainable("classifier.weight")
        assert classifier.state.call.replaced_outputs == {}
    finally:
        classifier.unfreeze().eval()
