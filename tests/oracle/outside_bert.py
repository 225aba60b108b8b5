"""An outside user's BERT encoder in NumPy, written from the formulas (the BERT paper,
transformers' modeling_bert.py), not from npbert's code: embeddings, post-LN layers, and a
hand-written backward.  npbert is the oracle it is tested against (test_outside_bert.py).

Each classic bug can be switched on by name (`bugs=`), so that the tests can show that the
property suite catches it:

    FORWARD_BUGS   no_max_shift        softmax as exp(s) / sum(exp(s)): overflows when scores pass ~709
                   unbiased_variance   LayerNorm with var(ddof=1)
                   eps_outside_sqrt    (x - mu) / (sqrt(var) + eps)
                   mask_after_softmax  softmax(s) + mask instead of softmax(s + mask)
                   no_scale            q k^T without the 1/sqrt(D)
                   tanh_gelu           GELU's tanh approximation where the config says "gelu" (exact)
                   interleaved_heads   head n takes columns n, n + N, ... instead of n D .. (n+1) D - 1
                   positions_from_1    position ids 1..T instead of 0..T-1
    BACKWARD_BUGS  no_softmax_sum_term the softmax backward without its "- sum(dp * p)"
                   no_residual_grad    the attention block's residual gradient dropped
                   layer_norm_no_projection  the LayerNorm backward without "- xhat mean(dxhat xhat)"
                   no_scale_backward   the scores' backward without the 1/sqrt(D)
                   tanh_gelu_backward  the exact GELU's forward with the tanh form's derivative
                   transposed_dW       the query weight's gradient transposed (x^T dq for dq^T x)

Shapes: B batch, T sequence, H hidden, N heads, D = H / N, I intermediate.  Weights are dicts
keyed as transformers' state dicts of BertLayer ("attention.self.query.weight", ...) and
BertEmbeddings ("word_embeddings.weight", ...); the config is a BertConfig (model.config).
"""
import math

import numpy as np

FORWARD_BUGS = ("no_max_shift", "unbiased_variance", "eps_outside_sqrt", "mask_after_softmax", "no_scale",
                "tanh_gelu", "interleaved_heads", "positions_from_1")
BACKWARD_BUGS = ("no_softmax_sum_term", "no_residual_grad", "layer_norm_no_projection", "no_scale_backward",
                 "tanh_gelu_backward", "transposed_dW")
CLASSIC_BUGS = ("no_max_shift", "unbiased_variance", "eps_outside_sqrt", "mask_after_softmax", "no_scale",
                "tanh_gelu", "interleaved_heads", "no_softmax_sum_term", "no_residual_grad", "positions_from_1")

_erf = np.vectorize(math.erf, otypes=[np.float64])


# ---- pieces -------------------------------------------------------------------------------------
def layer_norm(x, gamma, beta, eps, bugs):
    """y = gamma (x - mu) / sqrt(var + eps) + beta over the last axis (biased variance, as torch)."""
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, ddof=1 if "unbiased_variance" in bugs else 0, keepdims=True)
    std = np.sqrt(var) + eps if "eps_outside_sqrt" in bugs else np.sqrt(var + eps)
    xhat = (x - mu) / std
    return xhat * gamma + beta, (xhat, std, gamma)


def layer_norm_backward(dy, cache, bugs):
    """-> dx, dgamma, dbeta (sums over every axis but the last)."""
    xhat, std, gamma = cache
    dxhat = dy * gamma
    projection = 0.0 if "layer_norm_no_projection" in bugs else xhat * (dxhat * xhat).mean(-1, keepdims=True)
    dx = (dxhat - dxhat.mean(-1, keepdims=True) - projection) / std
    axes = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axes), dy.sum(axes)


def gelu(u, bugs):
    if "tanh_gelu" in bugs:
        return 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
    return 0.5 * u * (1 + _erf(u / math.sqrt(2)))                     # x Phi(x)


def gelu_backward(dy, u, bugs):
    if "tanh_gelu" in bugs or "tanh_gelu_backward" in bugs:           # d/du of the tanh form
        c = math.sqrt(2 / math.pi)
        t = np.tanh(c * (u + 0.044715 * u ** 3))
        return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t ** 2) * c * (1 + 3 * 0.044715 * u ** 2))
    phi = np.exp(-0.5 * u ** 2) / math.sqrt(2 * math.pi)
    return dy * (0.5 * (1 + _erf(u / math.sqrt(2))) + u * phi)        # Phi(u) + u phi(u)


def split_heads(x, N, bugs):
    """(B, T, H) -> (B, N, T, D)."""
    B, T, H = x.shape
    if "interleaved_heads" in bugs:
        return x.reshape(B, T, H // N, N).transpose(0, 3, 1, 2)
    return x.reshape(B, T, N, H // N).transpose(0, 2, 1, 3)


def merge_heads(x, bugs):
    """(B, N, T, D) -> (B, T, H), the inverse of split_heads."""
    B, N, T, D = x.shape
    if "interleaved_heads" in bugs:
        return x.transpose(0, 2, 3, 1).reshape(B, T, N * D)
    return x.transpose(0, 2, 1, 3).reshape(B, T, N * D)


def linear(x, w, b):
    return x @ w.T + b


def linear_backward(dy, x, w):
    """y = x W^T + b -> dx, dW, db."""
    return dy @ w, dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1]).sum(0)


# ---- one layer ----------------------------------------------------------------------------------
def layer_forward(w, x, keep, config, bugs=()):
    """One post-LN BERT layer.  w: BertLayer's state dict; x (B, T, H); keep: 1/0 (B, T) or None.
    Returns (out (B, T, H), cache)."""
    N, eps = config.num_attention_heads, config.layer_norm_eps
    D = x.shape[-1] // N
    p = lambda name: w["attention.self." + name]                                   # noqa: E731
    q, k, v = (split_heads(linear(x, p(n + ".weight"), p(n + ".bias")), N, bugs) for n in ("query", "key", "value"))
    s = q @ k.swapaxes(-1, -2)                                                     # (B, N, T, T)
    if "no_scale" not in bugs:
        s = s / math.sqrt(D)
    add = 0.0 if keep is None else (1.0 - keep[:, None, None, :]) * np.finfo(x.dtype).min
    if "mask_after_softmax" not in bugs:
        s = s + add
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s) if "no_max_shift" in bugs else np.exp(s - s.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True)
    if "mask_after_softmax" in bugs:
        probs = probs + add
    context = merge_heads(probs @ v, bugs)                                          # (B, T, H)
    with np.errstate(over="ignore", invalid="ignore"):
        a, ln1 = layer_norm(linear(context, w["attention.output.dense.weight"], w["attention.output.dense.bias"]) + x,
                            w["attention.output.LayerNorm.weight"], w["attention.output.LayerNorm.bias"], eps, bugs)
        u = linear(a, w["intermediate.dense.weight"], w["intermediate.dense.bias"])   # (B, T, I)
        hidden = gelu(u, bugs)
        out, ln2 = layer_norm(linear(hidden, w["output.dense.weight"], w["output.dense.bias"]) + a,
                              w["output.LayerNorm.weight"], w["output.LayerNorm.bias"], eps, bugs)
    cache = dict(w=w, x=x, q=q, k=k, v=v, probs=probs, context=context, a=a, u=u, hidden=hidden, ln1=ln1,
                 ln2=ln2, N=N, D=D, bugs=bugs)
    return out, cache


def layer_backward(dout, cache):
    """-> (dx (B, T, H), grads keyed as BertLayer's state dict)."""
    c, bugs = cache, cache["bugs"]
    w, g = c["w"], {}
    do, g["output.LayerNorm.weight"], g["output.LayerNorm.bias"] = layer_norm_backward(dout, c["ln2"], bugs)
    dhidden, g["output.dense.weight"], g["output.dense.bias"] = linear_backward(do, c["hidden"], w["output.dense.weight"])
    du = gelu_backward(dhidden, c["u"], bugs)
    da, g["intermediate.dense.weight"], g["intermediate.dense.bias"] = linear_backward(du, c["a"],
                                                                                      w["intermediate.dense.weight"])
    da = da + do                                                                   # a fed the FFN and its residual
    dsum, g["attention.output.LayerNorm.weight"], g["attention.output.LayerNorm.bias"] = layer_norm_backward(
        da, c["ln1"], bugs)
    dcontext, g["attention.output.dense.weight"], g["attention.output.dense.bias"] = linear_backward(
        dsum, c["context"], w["attention.output.dense.weight"])
    dctx = split_heads(dcontext, c["N"], bugs)                                     # (B, N, T, D)
    probs, q, k, v = c["probs"], c["q"], c["k"], c["v"]
    dv = probs.swapaxes(-1, -2) @ dctx
    dp = dctx @ v.swapaxes(-1, -2)                                                 # (B, N, T, T)
    ds = probs * dp if "no_softmax_sum_term" in bugs else probs * (dp - (dp * probs).sum(-1, keepdims=True))
    if "no_scale" not in bugs and "no_scale_backward" not in bugs:
        ds = ds / math.sqrt(c["D"])
    dq, dk = ds @ k, ds.swapaxes(-1, -2) @ q
    x = c["x"]
    dx = 0.0 if "no_residual_grad" in bugs else dsum                               # x fed the attention's residual
    for name, d in (("query", dq), ("key", dk), ("value", dv)):
        dxn, dw, db = linear_backward(merge_heads(d, bugs), x, w[f"attention.self.{name}.weight"])
        if name == "query" and "transposed_dW" in bugs:
            dw = dw.T
        g[f"attention.self.{name}.weight"], g[f"attention.self.{name}.bias"] = dw, db
        dx = dx + dxn
    return dx, g


# ---- embeddings and the whole encoder ----------------------------------------------------------
def embeddings_forward(w, input_ids, token_type_ids, config, bugs=()):
    """LayerNorm(word[ids] + position[0..T-1] + token_type[types]).  Returns (B, T, H), cache."""
    T = input_ids.shape[1]
    positions = np.arange(1, T + 1) if "positions_from_1" in bugs else np.arange(T)
    e = w["word_embeddings.weight"][input_ids] + w["position_embeddings.weight"][positions][None] \
        + w["token_type_embeddings.weight"][token_type_ids]
    out, ln = layer_norm(e, w["LayerNorm.weight"], w["LayerNorm.bias"], config.layer_norm_eps, bugs)
    return out, dict(w=w, ids=input_ids, types=token_type_ids, positions=positions, ln=ln, bugs=bugs,
                     pad=config.pad_token_id)


def embeddings_backward(dout, cache):
    """-> grads keyed as BertEmbeddings' state dict; the pad row of the word table gets none (torch)."""
    w, g = cache["w"], {}
    de, g["LayerNorm.weight"], g["LayerNorm.bias"] = layer_norm_backward(dout, cache["ln"], cache["bugs"])
    H = de.shape[-1]
    for name, ids in (("word_embeddings", cache["ids"]), ("token_type_embeddings", cache["types"]),
                      ("position_embeddings", np.broadcast_to(cache["positions"], cache["ids"].shape))):
        table = np.zeros_like(w[name + ".weight"])
        np.add.at(table, ids.reshape(-1), de.reshape(-1, H))
        g[name + ".weight"] = table
    g["word_embeddings.weight"][cache["pad"]] = 0
    return g


def encoder_forward(state_dict, input_ids, token_type_ids, keep, config, bugs=()):
    """Embeddings then every layer: the last hidden state (B, T, H), cache."""
    sub = lambda prefix: {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}   # noqa: E731
    h, emb_cache = embeddings_forward(sub("embeddings."), input_ids, token_type_ids, config, bugs)
    caches = []
    for i in range(config.num_hidden_layers):
        h, c = layer_forward(sub(f"encoder.layer.{i}."), h, keep, config, bugs)
        caches.append(c)
    return h, (emb_cache, caches)


def encoder_backward(dout, cache):
    """-> grads keyed as BertModel's state dict (the pooler aside)."""
    emb_cache, caches = cache
    grads = {}
    for i in reversed(range(len(caches))):
        dout, g = layer_backward(dout, caches[i])
        grads.update({f"encoder.layer.{i}.{k}": v for k, v in g.items()})
    grads.update({f"embeddings.{k}": v for k, v in embeddings_backward(dout, emb_cache).items()})
    return grads
