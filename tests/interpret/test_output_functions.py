"""Targets that are functions of an output (npbert.interpret.OutputMax / OutputSum / OutputSoftmax)
against captum run with the same forward function, as captum's BERT tutorial writes it
(`squad_pos_forward_func`: `start_logits.max(1).values`), on a tiny question-answering model and
a MiniLM classifier with the same weights, float64.  Tolerances as in test_captum.py: REL = 1e-9
relative (measured ~1e-14), convergence deltas within 1e-10; the max's entry moves along the path
on both sides, and both take the gradient at the entry that is the max at each point."""
import numpy as np
import pytest

import npbert.interpret as ni

from interpret_helpers import REL, load_pair, minilm_with_head, rel, t, tiny_checkpoint
from test_captum import extra, module, tutorial_baseline

torch = pytest.importorskip("torch")
captum_attr = pytest.importorskip("captum.attr")


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    return load_pair(tiny_checkpoint(tmp_path_factory.mktemp("qa"), "BertForQuestionAnswering", seed=3),
                     "BertForQuestionAnswering")


def squad_pos_forward_func(hf, position):
    """captum's tutorial: the largest start (position 0) or end (1) logit of each example."""
    def forward(input_ids, token_type_ids, attention_mask):
        out = hf(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        return (out.start_logits if position == 0 else out.end_logits).max(1).values
    return forward


@pytest.mark.parametrize("method", ["gausslegendre", "riemann_trapezoid"])
@pytest.mark.parametrize("position,layer", [(0, "bert.embeddings"), (1, "bert.embeddings.word_embeddings")])
def test_the_tutorials_max_of_the_start_and_end_logits(qa, position, layer, method):
    model, hf, tok = qa
    enc = tok(["is the cat on the mat", "where is the dog"], ["the cat is on the mat .", "in the garden"],
              padding=True, return_tensors="np", return_special_tokens_mask=True)
    lig = captum_attr.LayerIntegratedGradients(squad_pos_forward_func(hf, position), module(hf, layer))
    theirs, delta = lig.attribute(t(enc["input_ids"]), baselines=t(tutorial_baseline(tok, enc)),
                                  additional_forward_args=extra(enc), n_steps=8, method=method,
                                  return_convergence_delta=True)
    side = "start_logits" if position == 0 else "end_logits"
    ours = ni.integrated_gradients(model, enc, ni.OutputMax(side), n_steps=8, method=method, layer=layer,
                                   return_convergence_delta=True, captum_rounding=True)
    assert ours.target == f"max({side}[b])"
    assert rel(ours.attributions, theirs.detach()) < REL
    assert np.all(np.abs(ours.convergence_delta - delta.detach().numpy()) < 1e-10)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return minilm_with_head(str(tmp_path_factory.mktemp("cls")), "BertForSequenceClassification", num_labels=3)


@pytest.mark.parametrize("target,forward", [
    (ni.OutputSoftmax("logits", 2), lambda out: torch.softmax(out.logits, dim=1)[:, 2]),
    (ni.OutputSum("logits"), lambda out: out.logits.sum(1)),
    (ni.OutputMax("logits"), lambda out: out.logits.max(1).values)])
def test_a_probability_a_sum_and_a_max_of_the_logits(classifier, target, forward):
    model, hf, tok = classifier
    enc = tok(["the movie was surprisingly good", "dull"], padding=True, return_tensors="np",
              return_special_tokens_mask=True)

    def f(input_ids, token_type_ids, attention_mask):
        return forward(hf(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask))
    lig = captum_attr.LayerIntegratedGradients(f, hf.bert.embeddings)
    theirs = lig.attribute(t(enc["input_ids"]), baselines=t(tutorial_baseline(tok, enc)),
                           additional_forward_args=extra(enc), n_steps=6)
    ours = ni.integrated_gradients(model, enc, target, n_steps=6, captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL
    grads = ni.saliency(model, enc, target)                      # also by the other methods
    assert grads.attributions.shape == ours.attributions.shape


def test_a_function_of_an_output_the_model_lacks_is_an_error_naming_its_outputs(classifier):
    model, _, tok = classifier
    enc = tok(["fine"], return_tensors="np", return_special_tokens_mask=True)
    with pytest.raises(ValueError, match="no output 'start_logits'"):
        ni.integrated_gradients(model, enc, ni.OutputMax("start_logits"), n_steps=2)
    with pytest.raises(ValueError, match=r"needs logits of shape \(B, K\) with K > 7"):
        ni.saliency(model, enc, ni.OutputSoftmax("logits", 7))
    with pytest.raises(TypeError, match="string"):
        ni.OutputSum(3)
