"""Scaled dot-product attention over heads: what BertSelfAttention computes between its
projections, as one op (npbert.functional's public `attention_forward` / `attention_backward`,
and the layer functions of npbert/reference.py).

    B = batch, N = heads, F = queries, T = keys, D = head size

    scores  = q k^T * D**-0.5 + mask                    (B, N, F, T)
    probs   = dropout(softmax(scores)) * head_mask      (B, N, F, T)
    context = probs v                                   (B, N, F, D)

Both functions take an optional `record` dict, filled only when given (npbert.interpret, and
`model(..., output_intermediates=True)`): the forward puts the scores (the softmax's input,
mask included) there, the backward the gradient of the probabilities as used and of each head's
head-mask value (`head_mask_grad`).  Nothing is kept when it is None.

The fast path's twin (the per-head products batch row by batch row on threads, one BLAS
thread each, into `out=` buffers) is npbert/fast/attention.py.
"""
import numpy as np

from .dropout import dropout_backward, dropout_forward
from .softmax import softmax_backward, softmax_forward


def check_attention_inputs(q, k, v, mask, head_mask):
    """Shapes that do not fit are an error naming them; returns the mask as a 4-D array (or None)."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim != 4:
            raise ValueError(f"attention: {name} must be (B, N, T, D), got shape {a.shape}")
    B, N, F, D = q.shape
    if k.shape[:2] != (B, N) or k.shape[3] != D or v.shape != k.shape:
        raise ValueError(f"attention: q {q.shape}, k {k.shape} and v {v.shape} do not agree "
                         "(q (B, N, F, D), k and v (B, N, T, D))")
    T = k.shape[2]
    if mask is not None:
        mask = np.asarray(mask)
        if mask.ndim > 4:
            raise ValueError(f"attention: mask of shape {mask.shape} has more than 4 axes")
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        try:
            np.broadcast_shapes(mask.shape, (B, N, F, T))
        except ValueError:
            raise ValueError(f"attention: mask of shape {mask.shape} does not broadcast to "
                             f"the scores' (B, N, F, T) = {(B, N, F, T)}") from None
    if head_mask is not None and np.shape(head_mask) != (N,):
        raise ValueError(f"attention: head_mask must be ({N},), one value per head, "
                         f"got shape {np.shape(head_mask)}")
    return mask


def attention_forward(q, k, v, mask=None, head_mask=None, dropout_p=0.0, rng=None, training=False, scale=None,
                      record=None):
    """q: (B, N, F, D); k, v: (B, N, T, D); mask: additive (0 where attended, a large negative
    number such as finfo.min where masked), broadcastable to (B, N, F, T), or None; head_mask:
    (N,) or None; dropout on the probabilities when `training`, its masks from `rng` (an
    np.random.Generator or a DropoutKey, npbert/ops/dropout.py).  `scale`: what q k^T is
    multiplied by, D**-0.5 unless given (BertSelfAttention passes its `scaling`).

    record: an optional dict that gets record["attention_scores"] (B, N, F, T).

    Returns (context (B, N, F, D), cache); cache["probs"] holds the probabilities as used
    (after dropout and head mask)."""
    mask = check_attention_inputs(q, k, v, mask, head_mask)
    D = q.shape[-1]
    scale = q.dtype.type(D ** -0.5 if scale is None else scale)
    scores = q @ k.transpose(0, 1, 3, 2) * scale                            # (B, N, F, T)
    if mask is not None:
        scores = scores + mask                                              # finfo.min: exp gives 0
    if record is not None:
        record["attention_scores"] = scores                                 # (B, N, F, T), not changed below
    probs, softmax_cache = softmax_forward(scores)                          # (B, N, F, T)
    probs, dropout_cache = dropout_forward(probs, dropout_p, rng, training)  # (B, N, F, T)
    if head_mask is not None:
        probs = probs * np.asarray(head_mask, dtype=q.dtype)[None, :, None, None]
    context = probs @ v                                                     # (B, N, F, D)
    cache = dict(q=q, k=k, v=v, probs=probs, softmax=softmax_cache, dropout=dropout_cache,
                 head_mask=head_mask, scale=scale)
    return context, cache


def attention_backward(dcontext, cache, dprobs=None, record=None):
    """dcontext: (B, N, F, D); dprobs: optional upstream gradient of cache["probs"] (someone
    read the attention probabilities); record: an optional dict that gets
    record["attentions"] (B, N, F, T), the gradient of the probabilities as used, and
    record["head_mask"] (N,), the gradient of each head's head-mask value (head_mask_grad).
    Returns (dq (B, N, F, D), dk (B, N, T, D), dv (B, N, T, D))."""
    q, k, v, probs = cache["q"], cache["k"], cache["v"], cache["probs"]
    # in the forward: context = probs v
    dprobs_total = dcontext @ v.transpose(0, 1, 3, 2)                       # (B, N, F, T)
    dv = probs.transpose(0, 1, 3, 2) @ dcontext                             # (B, N, T, D)
    if dprobs is not None:
        dprobs_total = dprobs_total + dprobs                                # probs were an output too
    if record is not None:
        record["attentions"] = dprobs_total                                 # (B, N, F, T), not changed below
        record["head_mask"] = head_mask_grad(dprobs_total, cache["softmax"], cache["dropout"])
    # in the forward: probs = dropout(softmax(scores)) * head_mask
    if cache["head_mask"] is not None:
        dprobs_total = dprobs_total * np.asarray(cache["head_mask"], dtype=q.dtype)[None, :, None, None]
    dsoftmax = dropout_backward(dprobs_total, cache["dropout"])             # (B, N, F, T)
    dscores = softmax_backward(dsoftmax, cache["softmax"])                  # (B, N, F, T), rows sum to 0
    # in the forward: scores = q k^T * scale + mask   (the mask is a constant: no gradient)
    dscores = dscores * cache["scale"]
    dq = dscores @ k                                                        # (B, N, F, D)
    dk = dscores.transpose(0, 1, 3, 2) @ q                                  # (B, N, T, D)
    return dq, dk, dv


def head_mask_grad(dprobs, softmax_out, dropout_cache, dropout_backward=dropout_backward):
    """The gradient of each head's head-mask value xi_h, (B, N, F, T) -> (N,).

    In the forward: probs = dropout(softmax(scores)) * xi (xi = 1 when no head mask is given), so
        d/d xi_h = sum over (b, f, t) of dprobs[b, h, f, t] * dropout(softmax(scores))[b, h, f, t],
    dprobs the gradient of the probabilities as used.  dropout(softmax) is rebuilt from the
    softmax's output: dropout is y = x * keep * scale, a diagonal map, so its backward applied to
    x computes the forward's y (the same product, bit for bit); in eval it is x itself.  This
    holds for a head switched off (xi = 0) too, where probs / xi would not.
    `dropout_backward`: the path's own (the fast twin passes npbert.fast's)."""
    before_head_mask = dropout_backward(softmax_out, dropout_cache)                  # (B, N, F, T)
    return np.einsum("bnft,bnft->n", dprobs, before_head_mask)                       # (N,)
