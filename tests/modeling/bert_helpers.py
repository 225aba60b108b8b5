"""Shared helpers for the modeling tests: tiny configs, randomised models, transformers twins.

Random weights here are O(1) (std 0.5 for matrices, LayerNorm weight 1 +- 0.2, biases +- 0.2)
rather than the 0.02 of _init_weights: with 0.02 the attention scores are ~1e-3, the
query/key gradients ~1e-4 and the softmax almost uniform, so a wrong attention backward
would hide under round-off.  O(1) weights make every path carry an O(1) gradient.
"""
import numpy as np
import pytest

import npbert
from npbert.gradcheck import check_gradients

TINY = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=12, max_position_embeddings=16, type_vocab_size=2)
ACTIVATIONS = ["gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu"]

# Finite differences: the five-point centred stencil (npbert.gradcheck) with h = 1e-3.  The
# cs231n relative error is a max over entries, so it is set by the smallest gradient entries
# (~1e-4 here): these need an absolute error below 1e-11.  Round-off is ~eps * |loss terms| / h
# (~1e-12 at h = 1e-3, ~1e-11 at 1e-4) and truncation ~h^4 f^(5) (~1e-11 at h = 1e-3); measured
# on a BERT layer the worst entries are ~4e-9 at h = 1e-3, but 1.4e-7 at h = 1e-4 and ~1e-6
# with the 2-point difference at any h.  A ReLU kink within 2h of a pre-activation would break
# this; the fixed seeds keep every pre-activation further away than that.
FD = dict(h=1e-3, order=4)
FD_TOL = 1e-7            # the rel_error bound of the issue for every op and module


def tiny_config(**overrides):
    return npbert.BertConfig(**{**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                                **overrides})


def randomize(params, seed):
    """Overwrite every parameter in place with O(1) random values (see the module docstring)."""
    rng = np.random.default_rng(seed)
    for name, p in params.items():
        if "LayerNorm.weight" in name:
            p[...] = 1.0 + 0.2 * rng.standard_normal(p.shape)
        elif name.endswith("bias"):
            p[...] = 0.2 * rng.standard_normal(p.shape)
        else:
            p[...] = 0.5 * rng.standard_normal(p.shape)


def random_model(config=None, seed=0, dtype=np.float64, **overrides):
    """An npbert BertModel with O(1) random weights, in eval mode."""
    config = config or tiny_config(**overrides)
    model = npbert.BertModel(config, seed=seed, dtype=dtype).eval()
    randomize(model.state.params, seed + 1000)
    return model


def random_batch(config, B, T, seed=0, pad=True):
    """input_ids (no pad id except under the mask), token_type_ids, and a right-padded 0/1
    attention mask: row b keeps T - b positions (at least 1)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, config.vocab_size, size=(B, T))
    types = rng.integers(0, config.type_vocab_size, size=(B, T))
    mask = np.ones((B, T), dtype=np.int64)
    if pad:
        for b in range(B):
            keep = max(1, T - b)
            mask[b, keep:] = 0
            ids[b, keep:] = config.pad_token_id
    return ids, types, mask


def grad_scale(grads, prefix):
    """max |gradient| over the parameters under `prefix` (the scale for absolute bounds)."""
    return max(float(np.abs(g).max()) for k, g in grads.items() if k.startswith(prefix))


def assert_model_results(results):
    """The results of gradcheck.check_model: rel_error < FD_TOL everywhere, except the key
    bias, bounded absolutely by its layer's gradient scale (the entries checked)."""
    analytic = {k: c.analytic for k, c in results.items()}
    for name, c in results.items():
        if name.endswith("attention.self.key.bias"):
            layer = name.rsplit("attention.", 1)[0]
            assert_key_bias_zero(name, c.analytic, c.numerical, grad_scale(analytic, layer))
        else:
            assert c.rel_error < FD_TOL, (name, c.rel_error)


def assert_key_bias_zero(name, analytic, numerical, scale):
    """`attention.self.key.bias` has an analytically zero gradient: the bias adds q . b_k to every
    score of a query row, and softmax is shift-invariant along that row.  Its computed gradients
    are round-off on both sides (~1e-16 relative to the layer), so a relative error is
    meaningless; bound both absolutely by 1e-9 times the layer's gradient scale (the
    finite-difference round-off is ~eps / h = 1e-12 relative)."""
    assert np.abs(analytic).max() <= 1e-9 * scale, (name, np.abs(analytic).max(), scale)
    assert np.abs(numerical).max() <= 1e-9 * scale, (name, np.abs(numerical).max(), scale)


def check_module(module, forward, backward, inputs, seed=0, skip=()):
    """Finite-difference check of one module in float64.

    forward(**inputs) -> (outputs tuple, cache); backward(douts, cache) -> (dinputs dict, grads dict).
    Every gradient is checked against the five-point centred difference of
    sum_i sum(outputs[i] * douts[i]); the grads' keys must be exactly the module's
    parameters (those under its prefix) minus `skip`; each gradient has its array's shape.
    The key bias (analytically zero) is checked by `assert_key_bias_zero`.
    Returns {name: Comparison}.
    """
    params = module.state.params
    outs, cache = forward(**inputs)
    rng = np.random.default_rng(seed)
    douts = tuple(rng.standard_normal(o.shape) for o in outs)
    dinputs, grads = backward(douts, cache)
    expected = [k for k in params if k.startswith(module.prefix) and k not in skip]
    assert sorted(grads) == sorted(expected)
    for k, g in grads.items():
        assert g.shape == params[k].shape and g.dtype == params[k].dtype, k
    for k, g in dinputs.items():
        assert g.shape == inputs[k].shape and g.dtype == inputs[k].dtype, k

    def loss():
        return sum(float(np.sum(o * d)) for o, d in zip(forward(**inputs)[0], douts))

    arrays = {**{k: inputs[k] for k in dinputs}, **{k: params[k] for k in grads}}
    results = check_gradients(loss, arrays, {**dinputs, **grads}, **FD)
    scale = max(float(np.abs(c.analytic).max()) for c in results.values())
    for name, c in results.items():
        if name.endswith("attention.self.key.bias"):
            assert_key_bias_zero(name, c.analytic, c.numerical, scale)
        else:
            assert c.rel_error < FD_TOL, (name, c.rel_error)
    return results


# ---- transformers twins ---------------------------------------------------------------
def hf_twin(model, torch_dtype="float64"):
    """transformers' BertModel with `model`'s config (eager attention) and weights, eval mode."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    c = model.config
    hf_config = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
        hidden_act=c.hidden_act, hidden_dropout_prob=c.hidden_dropout_prob,
        attention_probs_dropout_prob=c.attention_probs_dropout_prob,
        max_position_embeddings=c.max_position_embeddings, type_vocab_size=c.type_vocab_size,
        layer_norm_eps=c.layer_norm_eps, pad_token_id=c.pad_token_id, attn_implementation="eager")
    hf = transformers.BertModel(hf_config)
    hf = (hf.double() if torch_dtype == "float64" else hf.float()).eval()
    state = {k: torch.from_numpy(np.array(v, dtype=np.float64 if torch_dtype == "float64" else np.float32))
             for k, v in model.state_dict().items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    buffers = {n for n, _ in hf.named_buffers()}
    assert not unexpected and set(missing) <= buffers, (missing, unexpected)
    return hf


def hf_model_and_twin(seed=0, **overrides):
    """A random transformers BertModel (float64) and an npbert BertModel holding its weights,
    copied with npbert's load_state_dict (the direction a user loads a checkpoint)."""
    torch = pytest.importorskip("torch")
    model = npbert.BertModel(tiny_config(**overrides), seed=seed, dtype=np.float64).eval()
    hf = hf_twin(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    buffers = {n for n, _ in hf.named_buffers()}
    model.load_state_dict({k: v.detach().numpy() for k, v in hf.state_dict().items() if k not in buffers})
    return model, hf
