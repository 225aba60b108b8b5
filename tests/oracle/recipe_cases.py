"""Drawn cases for npbert.gradcheck's recipe, shared by tests/oracle/test_gradcheck_recipe.py (a
modest number) and tests/bench/bench_gradcheck_recipe.py (thousands):

    model_case(data)   a correct npbert model (random O(1) weights, inputs with pad ids, padded
                       masks, train mode with dropout now and then) through check_model: every
                       Comparison must be ok (a failure here is the recipe crying wolf)
    layer_case(data)   the outside user's layer (outside_bert.py) through check_forward_backward:
                       the correct backward must pass, each wrong one of BACKWARD_BUGS must fail
                       wherever it changes a checked entry

Each returns a Counter of what happened (and the details of anything that went wrong).
"""
from collections import Counter

import numpy as np
from hypothesis import strategies as st

import npbert
import npbert.testing as nt
from npbert.gradcheck import check_forward_backward, check_model

import outside_bert as ob

NARROW = dict(max_heads=2, max_head_size=1)
MODEL_ENTRIES = 3          # sampled entries per parameter (the whole model: ~25-40 parameters)
LAYER_ENTRIES = 4          # sampled entries per array of the layer (16 weights and x)


def model_case(data):
    """One in four models is narrow (hidden size 1 or 2, LayerNorm eps 1e-5), where a row's spread
    comes near sqrt(eps) (the hard case of a fixed step) and many gradients are ~0."""
    narrow = data.draw(st.integers(0, 3)) == 0
    config = data.draw(nt.bert_configs(dropout=data.draw(st.booleans()), **NARROW if narrow else {}), label="config")
    if narrow:
        config.layer_norm_eps = 1e-5
    model = npbert.BertModel(config, seed=data.draw(st.integers(0, 99)), dtype=np.float64)
    model.load_state_dict(data.draw(nt.state_dicts(model), label="weights"))
    model.train() if config.hidden_dropout_prob > 0 else model.eval()
    inputs = data.draw(nt.model_inputs(config), label="inputs")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    B, T = inputs["attention_mask"].shape
    upstream = {"last_hidden_state": rng.standard_normal((B, T, config.hidden_size)),
                "pooler_output": rng.standard_normal((B, config.hidden_size))}
    checks = check_model(model, inputs, upstream, max_entries=MODEL_ENTRIES, seed=int(rng.integers(1 << 30)))
    counts = Counter(models=1, entries=sum(c.analytic.size for c in checks.values()))
    counts["with pad ids"] += bool(np.any(inputs["input_ids"] == config.pad_token_id))
    counts["hidden size 2, eps 1e-5"] += config.hidden_size == 2 and config.layer_norm_eps == 1e-5
    for name, c in checks.items():
        counts["entries refined"] += _refined(c.note)
        if not c.ok:
            counts["false failures"] += 1
            counts.setdefault("details", []).append((config.to_dict(), name, c.error, c.note))
    return counts


def _refined(note):
    """The number of entries the note says were estimated again."""
    for part in note.split("; "):
        if part.endswith("estimated again with smaller steps"):
            return int(part.split()[0])
    return 0


def layer_weights(config, rng, s):
    model = npbert.BertModel(config, dtype=np.float64)
    return {k[len("encoder.layer.0."):]: (1.0 if k.endswith("LayerNorm.weight") else 0.0) + rng.normal(0, s, v.shape)
            for k, v in model.state_dict().items() if k.startswith("encoder.layer.0.")}


def layer_case(data, bugs=ob.BACKWARD_BUGS):
    config = data.draw(nt.bert_configs(max_layers=1, activations=("gelu",)), label="config")
    B, T = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 6))
    case = dict(seed=data.draw(st.integers(0, 2 ** 32 - 1)), s=data.draw(st.sampled_from([0.3, 1.0])),
                x_scale=data.draw(st.sampled_from([1.0, 1.0, 30.0])),     # 30: the softmax saturates
                keep=data.draw(nt.attention_masks(B, T)))
    return layer_counts(config, bugs=bugs, **case)


def layer_counts(config, seed, s, x_scale, keep, bugs=ob.BACKWARD_BUGS):
    """The layer case for given draws (what layer_case's details print, to replay one)."""
    rng = np.random.default_rng(seed)
    weights = layer_weights(config, rng, s)
    x = rng.normal(size=keep.shape + (config.hidden_size,)) * x_scale
    dout = rng.standard_normal(x.shape)
    sample_seed = int(rng.integers(1 << 30))
    counts = Counter(layers=1)
    right = _check_layer(config, weights, x, keep, dout, (), sample_seed)
    if not all(c.ok for c in right.values()):
        counts["false failures"] += 1
        counts.setdefault("details", []).append((config.to_dict(), dict(seed=seed, s=s, x_scale=x_scale,
                                                                         keep=keep.tolist()),
                                                 {n: (c.error, c.note) for n, c in right.items() if not c.ok}))
    for bug in bugs:
        wrong = _check_layer(config, weights, x, keep, dout, (bug,), sample_seed)
        differs = any(np.any(np.abs(wrong[n].analytic - right[n].analytic)
                             > 1e-6 * np.maximum(np.abs(right[n].analytic), 1e-3 * _scale(right)))
                      for n in right)
        if differs:
            counts[f"{bug}: changes a checked entry"] += 1
            counts[f"{bug}: caught"] += not all(c.ok for c in wrong.values())
    return counts


def _scale(checks):
    return max(float(np.max(np.abs(c.analytic))) for c in checks.values())


def _check_layer(config, weights, x, keep, dout, bugs, seed):
    """check_forward_backward on the outside layer with `bugs` (backward bugs only: the forward is
    the same function), every weight and x differentiated, LAYER_ENTRIES entries each."""
    def forward(x, **w):
        return ob.layer_forward(w, x, keep, config, bugs)

    def backward(d, cache):
        dx, grads = ob.layer_backward(d, cache)
        return {"x": dx, **grads}

    inputs = {"x": x.copy(), **{k: v.copy() for k, v in weights.items()}}
    return check_forward_backward(forward, backward, inputs, dout=dout, max_entries=LAYER_ENTRIES, seed=seed)
