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


@pytest.mark.parametrize("training", [False, True])
def test_reference_functions_equal_the_model(training):
    config = tiny_config(num_hidden_layers=3, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    model = random_model(config, seed=3).train(training)
    ids, types, mask = random_batch(config, 4, 7, seed=3)
    dropout = None
    if training:                        # the step seed the model's forward will draw
        probe = np.random.PCG64()
        probe.state = model.state.rng.bit_generator.state
        dropout = (int(probe.random_raw()), 0)
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
