"""BertModel against transformers' BertModel (eager attention) on the same weights.

float64: every output and every parameter gradient (and d inputs_embeds) within cs231n
relative error 1e-9.  Both sides compute the same formula in the same order up to BLAS
blocking, so the differences are a few ulps (~1e-16 relative) per operation; 1e-9 leaves room
for the max-over-entries metric on entries that are small by cancellation (a sum over B*T
of gradients of both signs), and is still 7 orders of magnitude below any real error.

float32: per-tensor bounds on the *scaled* error max|a - b| / max|b| (the cs231n metric is
meaningless on float32 entries near zero), set from float32's eps = 1.2e-7 times the
accumulation depth, see F32_TOL.
"""
import numpy as np
import pytest

from npbert.gradcheck import rel_error

from bert_helpers import ACTIVATIONS, hf_model_and_twin, hf_twin, random_batch

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

F64_TOL = 1e-9


def torch_inputs(inputs):
    t = {}
    for k, v in inputs.items():
        if k == "inputs_embeds":
            t[k] = torch.from_numpy(np.array(v)).requires_grad_(True)
        else:
            t[k] = torch.from_numpy(np.asarray(v, dtype=np.int64))
    return t


def run_both(model, hf, inputs, upstream, hidden=False, attentions=False):
    """Forward and backward on both sides.  Returns (npbert output, npbert grads, npbert
    d inputs_embeds, hf output, hf grads {name: array}, hf d inputs_embeds)."""
    out = model(**inputs, output_hidden_states=hidden, output_attentions=attentions)
    grads = model.backward(**upstream)
    dembeds = model.inputs_embeds_grad

    hf.zero_grad()
    t_in = torch_inputs(inputs)
    t_out = hf(**t_in, output_hidden_states=hidden, output_attentions=attentions)
    loss = 0
    for name, up in upstream.items():
        value = getattr(t_out, name)
        if isinstance(up, (list, tuple)):
            for v, u in zip(value, up):
                if u is not None:
                    loss = loss + (v * torch.from_numpy(np.asarray(u, dtype=np.float64)).to(v.dtype)).sum()
        else:
            loss = loss + (value * torch.from_numpy(np.asarray(up, dtype=np.float64)).to(value.dtype)).sum()
    loss.backward()
    t_grads = {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape)) for n, p in hf.named_parameters()}
    t_dembeds = t_in["inputs_embeds"].grad.numpy() if "inputs_embeds" in t_in else None
    return out, grads, dembeds, t_out, t_grads, t_dembeds


def assert_grads_equal(grads, t_grads, tol=F64_TOL):
    assert list(grads) == list(t_grads)           # the same names, in named_parameters() order
    for name, g in grads.items():
        if name.endswith("attention.self.key.bias"):
            # Analytically zero (softmax is shift-invariant along a query row, and the key bias
            # adds q . b_k to a whole row): both sides hold round-off, ~1e-16 of the layer's
            # gradients.  Bound both absolutely by 1e-12 times the layer's gradient scale.
            layer = name.rsplit("attention.", 1)[0]
            scale = max(np.abs(v).max() for k, v in t_grads.items() if k.startswith(layer))
            assert np.abs(g).max() <= 1e-12 * scale, name
            assert np.abs(t_grads[name]).max() <= 1e-12 * scale, name
        else:
            assert rel_error(g, t_grads[name]) <= tol, (name, rel_error(g, t_grads[name]))


def upstream_for(model, B, T, seed, hidden=False, attentions=False):
    c = model.config
    rng = np.random.default_rng(seed)
    up = {"last_hidden_state": rng.standard_normal((B, T, c.hidden_size)),
          "pooler_output": rng.standard_normal((B, c.hidden_size))}
    if hidden:
        up["hidden_states"] = [rng.standard_normal((B, T, c.hidden_size)) for _ in range(c.num_hidden_layers + 1)]
    if attentions:
        N = c.num_attention_heads
        up["attentions"] = [rng.standard_normal((B, N, T, T)) for _ in range(c.num_hidden_layers)]
    return up


def assert_outputs_equal(out, t_out, hidden, attentions, tol=F64_TOL):
    assert rel_error(out.last_hidden_state, t_out.last_hidden_state.detach().numpy()) <= tol
    assert rel_error(out.pooler_output, t_out.pooler_output.detach().numpy()) <= tol
    if hidden:
        assert len(out.hidden_states) == len(t_out.hidden_states)
        for a, b in zip(out.hidden_states, t_out.hidden_states):
            assert rel_error(a, b.detach().numpy()) <= tol
    else:
        assert out.hidden_states is None
    if attentions:
        assert len(out.attentions) == len(t_out.attentions)
        for a, b in zip(out.attentions, t_out.attentions):
            assert rel_error(a, b.detach().numpy()) <= tol
    else:
        assert out.attentions is None


SHAPES = [(1, 1), (2, 5), (3, 7)]


@pytest.mark.parametrize("B,T,act", [(B, T, "gelu") for B, T in SHAPES[:-1]]
                         + [(*SHAPES[-1], act) for act in ACTIVATIONS])
def test_float64_outputs_and_gradients(B, T, act):
    """Padded batch (row b has b padded positions), random token types, every output with an
    upstream gradient.  gelu on every shape, every activation on the largest."""
    model, hf = hf_model_and_twin(seed=B * 10 + T, hidden_act=act)
    ids, types, mask = random_batch(model.config, B, T, seed=T)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    up = upstream_for(model, B, T, seed=1, hidden=True, attentions=True)
    out, grads, _, t_out, t_grads, _ = run_both(model, hf, inputs, up, hidden=True, attentions=True)
    assert_outputs_equal(out, t_out, True, True)
    assert_grads_equal(grads, t_grads)


@pytest.mark.parametrize("hidden,attentions", [(False, False), (True, False), (False, True)])
def test_output_flags(hidden, attentions):
    model, hf = hf_model_and_twin(seed=3, num_hidden_layers=3)
    ids, types, mask = random_batch(model.config, 2, 6, seed=3)
    up = upstream_for(model, 2, 6, seed=3, hidden=hidden, attentions=attentions)
    out, grads, _, t_out, t_grads, _ = run_both(model, hf, dict(input_ids=ids, attention_mask=mask), up,
                                                hidden, attentions)
    assert_outputs_equal(out, t_out, hidden, attentions)
    if hidden:
        assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    if attentions:
        assert out.attentions[0].shape == (2, model.config.num_attention_heads, 6, 6)
    assert_grads_equal(grads, t_grads)


def test_inputs_embeds_and_position_ids():
    """inputs_embeds instead of ids (its gradient compared with torch's), explicit position_ids."""
    model, hf = hf_model_and_twin(seed=4)
    rng = np.random.default_rng(4)
    _, types, mask = random_batch(model.config, 2, 5, seed=4)
    inputs = dict(inputs_embeds=rng.standard_normal((2, 5, 8)), token_type_ids=types, attention_mask=mask,
                  position_ids=np.array([[4, 3, 2, 1, 0], [0, 2, 4, 6, 8]]))
    up = upstream_for(model, 2, 5, seed=4)
    out, grads, dembeds, t_out, t_grads, t_dembeds = run_both(model, hf, inputs, up)
    assert_outputs_equal(out, t_out, False, False)
    assert rel_error(dembeds, t_dembeds) <= F64_TOL
    # no word embedding lookup: a zero gradient on both sides (torch: grad None -> zeros)
    assert np.all(grads["embeddings.word_embeddings.weight"] == 0)
    assert_grads_equal(grads, t_grads)


def test_word_embedding_gradient_with_pad_ids():
    """Pad ids under the mask and a repeated id: the word gradient scatter-adds the repeats and
    leaves the pad row at 0, as torch's padding_idx."""
    model, hf = hf_model_and_twin(seed=5)
    ids = np.array([[2, 7, 7, 7, 0], [7, 3, 0, 0, 0]])
    mask = (ids != 0).astype(np.int64)
    up = upstream_for(model, 2, 5, seed=5)
    _, grads, _, _, t_grads, _ = run_both(model, hf, dict(input_ids=ids, attention_mask=mask), up)
    assert np.all(grads["embeddings.word_embeddings.weight"][0] == 0)
    assert_grads_equal(grads, t_grads)


def test_fully_masked_row_and_no_pooler():
    """A batch row with no attended position (uniform attention over its masked keys, as
    transformers' finfo.min mask gives), and add_pooling_layer=False on both sides."""
    import npbert
    transformers = pytest.importorskip("transformers")
    model, hf = hf_model_and_twin(seed=9)
    ids, mask = np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[1, 1, 0, 0], [0, 0, 0, 0]])
    up = upstream_for(model, 2, 4, seed=9, attentions=True)
    out, grads, _, t_out, t_grads, _ = run_both(model, hf, dict(input_ids=ids, attention_mask=mask), up,
                                                attentions=True)
    assert np.all(out.attentions[0][1] == 0.25)
    assert_outputs_equal(out, t_out, False, True)
    assert_grads_equal(grads, t_grads)

    bare = npbert.BertModel(model.config, add_pooling_layer=False, dtype=np.float64)
    hf_bare = transformers.BertModel(hf.config, add_pooling_layer=False).double().eval()
    buffers = {n for n, _ in hf_bare.named_buffers()}
    assert list(bare.state_dict()) == [k for k in hf_bare.state_dict() if k not in buffers]
    bare.load_state_dict({k: v.detach().numpy() for k, v in hf_bare.state_dict().items() if k not in buffers})
    up = {"last_hidden_state": up["last_hidden_state"]}
    out, grads, _, t_out, t_grads, _ = run_both(bare, hf_bare, dict(input_ids=ids, attention_mask=mask), up)
    assert out.pooler_output is None and t_out.pooler_output is None
    assert rel_error(out.last_hidden_state, t_out.last_hidden_state.detach().numpy()) <= F64_TOL
    assert_grads_equal(grads, t_grads)


@pytest.mark.parametrize("which", ["pooler_output", "last_hidden_state", "hidden_states0", "hidden_states1",
                                   "hidden_states2", "attentions"])
def test_upstream_subsets(which):
    """An upstream gradient on one output only; the others contribute nothing."""
    model, hf = hf_model_and_twin(seed=6)
    B, T = 2, 4
    ids, types, mask = random_batch(model.config, B, T, seed=6)
    full = upstream_for(model, B, T, seed=6, hidden=True, attentions=True)
    if which.startswith("hidden_states"):
        i = int(which[-1])
        up = {"hidden_states": [full["hidden_states"][i] if j == i else None for j in range(3)]}
    else:
        up = {which: full[which]}
    _, grads, _, _, t_grads, _ = run_both(model, hf, dict(input_ids=ids, token_type_ids=types, attention_mask=mask),
                                          up, hidden=True, attentions=True)
    assert_grads_equal(grads, t_grads)
    if which == "pooler_output":
        assert np.abs(grads["pooler.dense.weight"]).max() > 0
    else:
        assert np.all(grads["pooler.dense.weight"] == 0)
    if which == "hidden_states0":      # the embedding output: no encoder parameter is involved
        assert all(np.all(g == 0) for k, g in grads.items() if k.startswith("encoder."))


# ---- float32 ------------------------------------------------------------------------------
# Scaled error  err(a, b) = max|a - b| / max|b|  per tensor.  float32 round-off is eps = 1.2e-7
# per operation, and it compounds with the accumulation depth: a dot product over K terms
# (K = H = 32 or I = 37 here) contributes ~sqrt(K) eps, a layer chains ~6 such stages through
# LayerNorm (division by a std), a softmax made sharp by O(1) random weights (scores ~3) and
# GELU, and L = 3 layers chain 18; the backward runs the chain again and sums over B*T = 21
# positions.  Measured (seeds 8..11): outputs up to 8.5e-6 (~70 eps, the pooler's tanh at
# pre-activations ~3), gradients up to 2.2e-5 (~180 eps).  The bounds are ~3x those: 2.5e-5
# (~200 eps) for every forward tensor and 8e-5 (~650 eps) for every gradient.  A wrong formula
# is off by O(1); a path silently run in float64 is caught by the dtype asserts; and
# test_float32_as_accurate_as_torch checks the accuracy itself against the float64 truth.
F32_TOL = {"last_hidden_state": 2.5e-5, "pooler_output": 2.5e-5, "hidden_states": 2.5e-5, "attentions": 2.5e-5,
           "grads": 8e-5}


def scaled_error(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


@pytest.mark.parametrize("config", [dict(), dict(hidden_size=32, num_attention_heads=4, intermediate_size=37,
                                                 num_hidden_layers=3, hidden_act="gelu_new")])
def test_float32_against_torch_float32(config):
    model, hf, _, _ = float32_pair(8, **config)
    assert all(p.dtype == np.float32 for p in model.state.params.values())
    B, T, H = 3, 7, model.config.hidden_size
    ids, types, mask = random_batch(model.config, B, T, seed=8)
    up = {k: (v.astype(np.float32) if not isinstance(v, list) else [x.astype(np.float32) for x in v])
          for k, v in upstream_for(model, B, T, seed=8, hidden=True, attentions=True).items()}
    out, grads, dembeds, t_out, t_grads, _ = run_both(
        model, hf, dict(input_ids=ids, token_type_ids=types, attention_mask=mask), up, True, True)
    assert out.last_hidden_state.dtype == np.float32 and dembeds.dtype == np.float32
    for name in ("last_hidden_state", "pooler_output"):
        assert scaled_error(getattr(out, name), getattr(t_out, name).detach().numpy()) <= F32_TOL[name], name
    for kind in ("hidden_states", "attentions"):
        for a, b in zip(getattr(out, kind), getattr(t_out, kind)):
            assert a.dtype == np.float32
            assert scaled_error(a, b.detach().numpy()) <= F32_TOL[kind], kind
    for name, g in grads.items():
        assert g.dtype == np.float32, name
        if name.endswith("attention.self.key.bias"):
            # analytically zero: float32 round-off on both sides, bounded by ~100 eps of the layer's scale
            layer = name.rsplit("attention.", 1)[0]
            scale = max(np.abs(v).max() for k, v in t_grads.items() if k.startswith(layer))
            assert np.abs(g).max() <= 1e-5 * scale, name
            continue
        assert scaled_error(g, t_grads[name]) <= F32_TOL["grads"], (name, scaled_error(g, t_grads[name]))


def float32_pair(seed, **config):
    """(npbert float32, torch float32, npbert float64, torch float64), the same weights."""
    import npbert
    model64, hf64 = hf_model_and_twin(seed=seed, **config)
    model = npbert.BertModel(model64.config, dtype=np.float32).eval()
    model.load_state_dict(model64.state_dict())
    return model, hf_twin(model, torch_dtype="float32"), model64, hf64


@pytest.mark.parametrize("seed", [9, 11])
def test_float32_as_accurate_as_torch(seed):
    """Against the float64 result as the truth, npbert's float32 error is at most 8x torch's own
    float32 error (or 8 eps where torch is exact): measured ratios are 0.5..2.2 on outputs and
    1.2..4.8 on gradients, the different summation orders of two BLAS calls.  A float32
    implementation that loses precision somewhere (a cancellation torch avoids) fails this."""
    model, hf, model64, hf64 = float32_pair(seed, hidden_size=32, num_attention_heads=4, intermediate_size=37,
                                            num_hidden_layers=3, hidden_act="gelu_new")
    B, T = 3, 7
    ids, types, mask = random_batch(model.config, B, T, seed=seed)
    up32 = {k: v.astype(np.float32) for k, v in upstream_for(model, B, T, seed=seed).items()}
    up64 = {k: v.astype(np.float64) for k, v in up32.items()}
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    out, grads, _, t_out, t_grads, _ = run_both(model, hf, inputs, up32)
    out64, grads64, _, _, _, _ = run_both(model64, hf64, inputs, up64)
    floor = 1.2e-7
    for name in ("last_hidden_state", "pooler_output"):
        truth = getattr(out64, name)
        ours = scaled_error(getattr(out, name), truth)
        theirs = scaled_error(getattr(t_out, name).detach().numpy(), truth)
        assert ours <= 8 * max(theirs, floor), (name, ours, theirs)
    for name, g in grads.items():
        if name.endswith("attention.self.key.bias"):
            continue    # analytically zero: both are round-off (bounded in test_float32_against_torch_float32)
        ours, theirs = scaled_error(g, grads64[name]), scaled_error(t_grads[name], grads64[name])
        assert ours <= 8 * max(theirs, floor), (name, ours, theirs)
