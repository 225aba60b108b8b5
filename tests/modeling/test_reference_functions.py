"""npbert/reference.py (the whole BERT as plain functions over a state dict) computes what
BertModel computes: outputs, every gradient and d inputs_embeds, float64, dropout off and on (the
same keyed masks from the same step seed), to 1e-12 relative (the same reference ops in the same
order on the reference path; on the fast path its twins, equal to round-off).  On both paths
(tests/modeling/conftest.py)."""
import numpy as np
import pytest

from npbert import reference

from bert_helpers import random_batch, random_model, tiny_config

TOL = 1e-12


def rel(a, b):
    scale = np.abs(b).max()
    return np.abs(a - b).max() / scale if scale else np.abs(a - b).max()


def next_dropout(model):
    """reference.py's `dropout` for the model's next forward: (the step seed it will draw, first row 0),
    or None in eval mode."""
    if not model.training:
        return None
    probe = np.random.PCG64()
    probe.state = model.state.rng.bit_generator.state
    return int(probe.random_raw()), 0


@pytest.mark.parametrize("training", [False, True])
def test_reference_functions_equal_the_model(training):
    config = tiny_config(num_hidden_layers=3, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    model = random_model(config, seed=3).train(training)
    ids, types, mask = random_batch(config, 4, 7, seed=3)
    dropout = next_dropout(model)
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                output_hidden_states=True, output_attentions=True)
    rng = np.random.default_rng(4)
    dlast, dpooled = rng.standard_normal(out.last_hidden_state.shape), rng.standard_normal(out.pooler_output.shape)
    grads = model.backward(last_hidden_state=dlast, pooler_output=dpooled)

    params = model.state_dict()
    ref_out, cache = reference.bert_forward(params, config, ids, mask, types, dropout=dropout)
    ref_grads, ref_dembeds = reference.bert_backward(params, config, cache, dlast, dpooled)

    for key in ("last_hidden_state", "pooler_output"):
        assert rel(out[key], ref_out[key]) <= TOL, key
    for a, b in zip(out.hidden_states + out.attentions, ref_out["hidden_states"] + ref_out["attentions"]):
        assert rel(a, b) <= TOL
    assert list(ref_grads) == list(grads)
    for name, g in grads.items():
        if name.endswith("attention.self.key.bias"):      # zero in exact arithmetic: against its layer's weight
            scale = np.abs(grads[name.replace("bias", "weight")]).max()
            assert max(np.abs(g).max(), np.abs(ref_grads[name]).max()) <= 1e-9 * scale, name
        else:
            assert rel(ref_grads[name], g) <= TOL, name
    assert rel(ref_dembeds, model.inputs_embeds_grad) <= TOL


def test_the_layer_functions_are_one_layers_forward_and_backward():
    """layer_forward / layer_backward alone: layer 1 of a model, against finite differences of
    sum(layer output * dy) in its input (float64, five-point stencil, cs231n rel_error < 1e-7)."""
    from npbert.gradcheck import numerical_gradient, rel_error
    config = tiny_config()
    params = random_model(config, seed=5).state_dict()
    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal((2, 5, config.hidden_size)), rng.standard_normal((2, 5, config.hidden_size))
    y, probs, cache = reference.bert_layer_forward(params, config, 1, x)
    assert y.shape == x.shape and probs.shape == (2, config.num_attention_heads, 5, 5)
    grads = {}
    dx = reference.bert_layer_backward(params, config, 1, dy, cache, grads)
    assert sorted(grads) == sorted(n for n in params if n.startswith("encoder.layer.1."))
    numerical = numerical_gradient(lambda v: np.sum(reference.bert_layer_forward(params, config, 1, v)[0] * dy), x.copy(),
                                   h=1e-3, order=4)
    assert rel_error(dx, numerical) < 1e-7


@pytest.mark.parametrize("training", [False, True])
def test_grads_acts_beside_acts(training):
    """bert_backward(..., grads_acts={}) keeps the gradient of every activation under the activation's
    name (llm.c's grads_acts beside acts): the same keys and shapes as activations(cache), and the
    numbers the model's public backward gives where it has them (its intermediate gradients: every
    hidden state, every layer's probabilities; inputs_embeds_grad), 1e-12 relative in float64 (the
    same operations, another summation order on the fast path).  The scores' gradient, which
    attention_backward folds into d query, gives d query back: d scores K * D**-0.5."""
    config = tiny_config(num_hidden_layers=3, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    model = random_model(config, seed=6).train(training)
    ids, types, mask = random_batch(config, 3, 6, seed=6)
    dropout = next_dropout(model)
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    rng = np.random.default_rng(7)
    dlast, dpooled = rng.standard_normal(out.last_hidden_state.shape), rng.standard_normal(out.pooler_output.shape)
    _, igrads = model.backward(last_hidden_state=dlast, pooler_output=dpooled, return_intermediate_grads=True)

    _, cache = reference.bert_forward(model.state_dict(), config, ids, mask, types, dropout=dropout)
    acts, grads_acts = reference.activations(cache), {}
    _, dembeds = reference.bert_backward(model.state_dict(), config, cache, dlast, dpooled, grads_acts=grads_acts)
    pairs = [(acts["embeddings"], grads_acts["embeddings"]), (acts["pooler"], grads_acts["pooler"])]
    pairs += list(zip(acts["layers"], grads_acts["layers"]))
    for a, g in pairs:
        assert list(a) and set(a) == set(g)
        assert all(a[k].shape == g[k].shape for k in a), [k for k in a if a[k].shape != g[k].shape]
    assert rel(grads_acts["embeddings"]["embeddings"], igrads.hidden_states[0]) <= TOL
    assert rel(grads_acts["embeddings"]["sum"], dembeds) == 0 and rel(dembeds, model.inputs_embeds_grad) <= TOL
    for i, g in enumerate(grads_acts["layers"]):
        assert rel(g["layer_output"], igrads.hidden_states[i + 1]) <= TOL, i
        assert rel(g["probs"], igrads.attentions[i]) <= TOL, i
        attn = cache[1][i]["attn"]
        assert rel((g["scores"] * attn["scale"]) @ attn["k"], g["query"]) <= TOL, i
    np.testing.assert_array_equal(grads_acts["pooler"]["pooled"], dpooled)
