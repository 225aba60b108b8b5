"""Finite differences in float64 for every module of the core, on every input and parameter.

Each test runs one HF-named module of a tiny random model on its own, and compares every
gradient its backward returns with the five-point centred difference (bert_helpers.FD) of
sum(output * dout): cs231n relative error < 1e-7 (bert_helpers.FD_TOL).  The key bias, whose
gradient is analytically zero, is bounded absolutely instead (bert_helpers.assert_key_bias_zero).
"""
import numpy as np
import pytest

from npbert.gradcheck import check_gradients, check_model, rel_error
from npbert.ops.linear import linear_forward

from bert_helpers import (ACTIVATIONS, FD, FD_TOL, assert_model_results, check_module, random_batch,
                          random_model)

B, T = 2, 4


@pytest.fixture(scope="module")
def model(npbert_path):          # built on each path (a model's path is fixed when it is built)
    return random_model(seed=3)


def hidden(model, seed, shape=None):
    H = model.config.hidden_size
    return np.random.default_rng(seed).standard_normal(shape or (B, T, H))


def additive(model, mask):
    """The (B, 1, 1, T) or (B, 1, T, T) additive mask BertModel builds from a 0/1 mask."""
    return model._extended_attention_mask(np.asarray(mask), B, T)


MASK_2D = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])
MASK_3D = np.array([[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],      # causal
                    [[1, 1, 0, 1], [0, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 1]]])     # arbitrary


def test_embeddings_input_ids(model):
    emb = model.embeddings
    ids, types, _ = random_batch(model.config, B, T, seed=1, pad=False)
    pos = np.broadcast_to(np.arange(T), (B, T))

    def forward():
        out, cache = emb.forward(ids, types, pos)
        return (out,), cache

    check_module(emb, forward, lambda d, cache: ({}, emb.backward(d[0], cache)[1]), {})


def test_embeddings_inputs_embeds(model):
    """With inputs_embeds the word table is not used: no gradient for it, and d inputs_embeds
    is checked as an input."""
    emb = model.embeddings
    _, types, _ = random_batch(model.config, B, T, seed=2, pad=False)
    pos = np.array([[3, 1, 2, 0], [5, 6, 7, 8]])          # explicit, non-default positions

    def forward(inputs_embeds):
        out, cache = emb.forward(None, types, pos, inputs_embeds)
        return (out,), cache

    def backward(d, cache):
        dx, grads = emb.backward(d[0], cache)
        return {"inputs_embeds": dx}, grads

    check_module(emb, forward, backward, {"inputs_embeds": hidden(model, 5)},
                 skip=("embeddings.word_embeddings.weight",))


def test_embeddings_padding_row_gets_no_gradient(model):
    """As torch's nn.Embedding(padding_idx=pad_token_id): the pad row is used in the forward
    (finite differences see it) but its gradient is zero; every other row matches."""
    emb = model.embeddings
    pad = model.config.pad_token_id
    ids = np.array([[5, pad, 7, 5], [pad, pad, 3, 5]])     # repeated ids and pads
    types = np.zeros((B, T), dtype=np.int64)
    pos = np.broadcast_to(np.arange(T), (B, T))
    out, cache = emb.forward(ids, types, pos)
    dout = np.random.default_rng(0).standard_normal(out.shape)
    dword = emb.backward(dout, cache)[1]["embeddings.word_embeddings.weight"]
    assert np.all(dword[pad] == 0)
    W = model.state.params["embeddings.word_embeddings.weight"]
    c = check_gradients(lambda: float(np.sum(emb.forward(ids, types, pos)[0] * dout)),
                        {"w": W}, {"w": dword}, **FD)["w"]
    assert np.abs(c.numerical[pad]).max() > 1e-3               # the pad row does feed the output
    rows = [v for v in range(W.shape[0]) if v != pad]
    assert rel_error(c.analytic[rows], c.numerical[rows]) < FD_TOL


@pytest.mark.parametrize("mask", [None, "2d", "3d"])
@pytest.mark.parametrize("with_head_mask", [False, True])
def test_self_attention(model, mask, with_head_mask):
    """Both outputs (context and the probabilities) get an upstream gradient."""
    att = model.encoder.layer[0].attention.self
    m = {None: None, "2d": additive(model, MASK_2D), "3d": additive(model, MASK_3D)}[mask]
    head_mask = np.array([0.7, 0.0]) if with_head_mask else None   # one head switched off

    def forward(hidden_states):
        context, probs, cache = att.forward(hidden_states, m, head_mask)
        return (context, probs), cache

    def backward(d, cache):
        dx, grads = att.backward(d[0], cache, dprobs=d[1])
        return {"hidden_states": dx}, grads

    check_module(att, forward, backward, {"hidden_states": hidden(model, 7)})


def test_self_output(model):
    so = model.encoder.layer[1].attention.output

    def forward(hidden_states, input_tensor):
        out, cache = so.forward(hidden_states, input_tensor)
        return (out,), cache

    def backward(d, cache):
        dx, dres, grads = so.backward(d[0], cache)
        return {"hidden_states": dx, "input_tensor": dres}, grads

    check_module(so, forward, backward, {"hidden_states": hidden(model, 8), "input_tensor": hidden(model, 9)})


@pytest.mark.parametrize("mask", [None, "2d"])
def test_attention(model, mask):
    att = model.encoder.layer[1].attention
    m = None if mask is None else additive(model, MASK_2D)

    def forward(hidden_states):
        out, probs, cache = att.forward(hidden_states, m, np.array([1.0, 0.5]))
        return (out, probs), cache

    def backward(d, cache):
        dx, grads = att.backward(d[0], cache, dprobs=d[1])
        return {"hidden_states": dx}, grads

    check_module(att, forward, backward, {"hidden_states": hidden(model, 10)})


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_intermediate(act):
    m = random_model(seed=22, hidden_act=act, num_hidden_layers=1)
    inter = m.encoder.layer[0].intermediate
    if act == "relu":
        assert_away_from_relu_kink(linear_forward(hidden(m, 11), m.p("encoder.layer.0.intermediate.dense.weight"),
                                                  m.p("encoder.layer.0.intermediate.dense.bias"))[0])

    def forward(hidden_states):
        out, cache = inter.forward(hidden_states)
        return (out,), cache

    def backward(d, cache):
        dx, grads = inter.backward(d[0], cache)
        return {"hidden_states": dx}, grads

    check_module(inter, forward, backward, {"hidden_states": hidden(m, 11)})


def test_output(model):
    out_mod = model.encoder.layer[0].output
    inter = hidden(model, 12, (B, T, model.config.intermediate_size))

    def forward(hidden_states, input_tensor):
        out, cache = out_mod.forward(hidden_states, input_tensor)
        return (out,), cache

    def backward(d, cache):
        dx, dres, grads = out_mod.backward(d[0], cache)
        return {"hidden_states": dx, "input_tensor": dres}, grads

    check_module(out_mod, forward, backward, {"hidden_states": inter, "input_tensor": hidden(model, 13)})


def assert_away_from_relu_kink(pre):
    """Finite differences across ReLU's kink are wrong by O(1).  A perturbation of size 2h = 2e-3
    of one weight moves a pre-activation by at most 2h * max|input| (< 0.02 here): the seeds
    are chosen so that every pre-activation is further from 0 than 0.05."""
    assert np.abs(pre).min() > 0.05


@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_layer(act):
    m = random_model(seed=12, hidden_act=act, num_hidden_layers=1)
    layer = m.encoder.layer[0]
    mask = additive(m, MASK_2D)
    if act == "relu":
        attention_output = layer.attention.forward(hidden(m, 14), mask, np.array([1.0, 0.25]))[0]
        assert_away_from_relu_kink(linear_forward(attention_output, m.p("encoder.layer.0.intermediate.dense.weight"),
                                                  m.p("encoder.layer.0.intermediate.dense.bias"))[0])

    def forward(hidden_states):
        out, probs, cache = layer.forward(hidden_states, mask, np.array([1.0, 0.25]))
        return (out, probs), cache

    def backward(d, cache):
        dx, grads = layer.backward(d[0], cache, dprobs=d[1])
        return {"hidden_states": dx}, grads

    check_module(layer, forward, backward, {"hidden_states": hidden(m, 14)})


def test_encoder(model):
    """Upstream gradients on the last hidden state, on every hidden state (incl. the encoder's
    input, hidden_states[0]) and on every layer's attention probabilities; head_mask [L, N]."""
    enc = model.encoder
    L = model.config.num_hidden_layers
    mask = additive(model, MASK_2D)
    head_mask = np.array([[1.0, 0.0], [0.5, 1.0]])

    def forward(hidden_states):
        last, all_hidden, all_attn, cache = enc.forward(hidden_states, mask, head_mask,
                                                       output_hidden_states=True, output_attentions=True)
        return (last, *all_hidden, *all_attn), cache

    def backward(d, cache):
        dx, grads = enc.backward(d[0], cache, dhidden_states=list(d[1:L + 2]), dattentions=list(d[L + 2:]))
        return {"hidden_states": dx}, grads

    check_module(enc, forward, backward, {"hidden_states": hidden(model, 15)})


def test_pooler(model):
    pooler = model.pooler

    def forward(hidden_states):
        out, cache = pooler.forward(hidden_states)
        return (out,), cache

    def backward(d, cache):
        dx, grads = pooler.backward(d[0], cache)
        return {"hidden_states": dx}, grads

    check_module(pooler, forward, backward, {"hidden_states": hidden(model, 16)})


def test_bert_model_every_parameter():
    """The whole model, every entry of every parameter, on a padded batch with token types,
    upstream gradients on last_hidden_state and pooler_output."""
    model = random_model(seed=6, num_hidden_layers=1, vocab_size=10, max_position_embeddings=6)
    ids, types, mask = random_batch(model.config, 2, 4, seed=6)
    ids[1, -1] = 3                    # no pad id (see test_embeddings_padding_row_gets_no_gradient)
    rng = np.random.default_rng(6)
    up = {"last_hidden_state": rng.standard_normal((2, 4, 8)), "pooler_output": rng.standard_normal((2, 8))}
    results = check_model(model, dict(input_ids=ids, token_type_ids=types, attention_mask=mask), up, **FD)
    assert set(results) == set(model.state.params)
    assert_model_results(results)


@pytest.mark.parametrize("case", ["inputs_embeds", "head_mask_1d", "head_mask_2d_3d_mask", "all_outputs"])
def test_bert_model_variants(case):
    """Sampled entries (12 per parameter) of the whole model under each input variant."""
    model = random_model(seed=7)
    c = model.config
    ids, types, mask = random_batch(c, 2, 4, seed=7)
    ids[mask == 0] = 1        # no pad id: its row's zero gradient is a convention FD cannot see
    rng = np.random.default_rng(7)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    up = {"last_hidden_state": rng.standard_normal((2, 4, 8)), "pooler_output": rng.standard_normal((2, 8))}
    if case == "inputs_embeds":
        inputs.pop("input_ids")
        inputs["inputs_embeds"] = rng.standard_normal((2, 4, 8))
    elif case == "head_mask_1d":
        inputs["head_mask"] = np.array([0.5, 1.0])
    elif case == "head_mask_2d_3d_mask":
        inputs["head_mask"] = np.array([[1.0, 0.0], [0.3, 2.0]])
        inputs["attention_mask"] = MASK_3D
    else:
        inputs.update(output_hidden_states=True, output_attentions=True)
        up["hidden_states"] = [rng.standard_normal((2, 4, 8)) for _ in range(c.num_hidden_layers + 1)]
        up["attentions"] = [rng.standard_normal((2, 2, 4, 4)) for _ in range(c.num_hidden_layers)]
    names = list(model.state.params)
    if case == "inputs_embeds":
        names = [n for n in names if n != "embeddings.word_embeddings.weight"] + ["inputs_embeds"]
    results = check_model(model, inputs, up, names=names, max_entries=12, **FD)
    assert set(results) == set(names)
    assert_model_results(results)
    if case == "inputs_embeds":
        model(**inputs)
        assert np.all(model.backward(**up)["embeddings.word_embeddings.weight"] == 0)   # not used: zeros
