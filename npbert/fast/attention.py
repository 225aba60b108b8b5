"""The fast path's attention op.  It computes what npbert/ops/attention.py computes,

    scores  = q k^T * D**-0.5 + mask                    (B, N, F, T)
    probs   = dropout(softmax(scores)) * head_mask      (B, N, F, T)
    context = probs v                                   (B, N, F, D)

with the same arithmetic per batch row, except two things equal to round-off: the softmax
is taken without subtracting each row's max where no exp can overflow
(npbert/fast/softmax.py: softmax_forward_unshifted), and the backward's softmax row sums are an
einsum.  The per-head products run batch row by batch row with
one BLAS thread each, and the scaling, masking and softmax between them on npbert's threads
(`over_batch`), in place in one (B, N, F, T) array; the context can be written into a caller's
buffer (`out=`), and the backward can free its cache as it goes (`free=`).  Same cache keys as
the reference, and the same optional `record` dict (the scores, the gradients of the probabilities
and of the head-mask values), filled with copies where this op works in place.
"""
import numpy as np

from npbert.ops.attention import check_attention_inputs, head_mask_grad

from .dropout import dropout_backward, dropout_forward
from .parallel import over_batch
from .softmax import softmax_backward, softmax_forward_unshifted


def _rows(a, start, stop):
    """Batch rows [start, stop) of an array whose batch axis may be broadcast (size 1)."""
    return a if a.shape[0] == 1 else a[start:stop]


def attention_forward(q, k, v, mask=None, head_mask=None, dropout_p=0.0, rng=None, training=False, scale=None,
                      out=None, record=None):
    """context = dropout(softmax(q k^T * scale + mask)) * head_mask @ v, as npbert/ops/attention.py's
    attention_forward (the same arguments), per batch row on threads; `out`: an array
    (B, N, F, D) (a view is fine) to write the context into; `record`: an optional dict that gets
    record["attention_scores"] (B, N, F, T), a copy (the softmax overwrites the scores here).

    Returns (context (B, N, F, D), cache); cache["probs"] holds the probabilities as used
    (after dropout and head mask)."""
    mask = check_attention_inputs(q, k, v, mask, head_mask)
    if mask is not None and not mask.any():
        mask = None                         # all zeros (nothing masked): adding it changes no score
    if training and dropout_p > 0.0 and rng is None:
        raise ValueError("attention: dropout in training needs a generator: pass rng=np.random.default_rng(seed)")
    B, N, F, D = q.shape
    T = k.shape[2]
    scale = q.dtype.type(D ** -0.5 if scale is None else scale)
    scores = np.empty((B, N, F, T), dtype=q.dtype)                                # (B, N, F, T)
    kept_scores = None if record is None else np.empty_like(scores)               # only when asked for

    def scores_of(a, b):                                                          # batch rows [a, b)
        s = np.matmul(q[a:b], k[a:b].transpose(0, 1, 3, 2), out=scores[a:b])      # q k^T
        s *= scale                                                                # / sqrt(D)
        if mask is not None:
            s += _rows(mask, a, b)
        return s

    def scores_and_softmax(a, b):
        s = scores_of(a, b)
        if kept_scores is not None:
            kept_scores[a:b] = s                                                  # before the softmax overwrites it
        softmax_forward_unshifted(s, lambda i: scores_of(a + i, a + i + 1))       # in place
    over_batch(scores_and_softmax, B)
    if record is not None:
        record["attention_scores"] = kept_scores
    cache = {"softmax": scores}                                                   # softmax's cache is its output
    probs, cache["dropout"] = dropout_forward(scores, dropout_p, rng, training)   # threaded draw and multiply
    if head_mask is not None:
        probs = probs * np.asarray(head_mask, dtype=q.dtype)[None, :, None, None]

    context = np.empty((B, N, F, D), dtype=q.dtype) if out is None else out       # (B, N, F, D)

    def weighted_values(a, b):
        np.matmul(probs[a:b], v[a:b], out=context[a:b])                           # probs v
    over_batch(weighted_values, B)
    cache.update(q=q, k=k, v=v, probs=probs, head_mask=head_mask, scale=scale)
    return context, cache


def attention_backward(dcontext, cache, dprobs=None, out=None, free=False, record=None):
    """dv = probs^T dcontext; dscores = softmax_backward(dropout_backward(dcontext v^T + dprobs) *
    head_mask) * scale; dq = dscores k; dk = dscores^T q: npbert/ops/attention.py's
    attention_backward, per batch row on threads.  dcontext: (B, N, F, D); dprobs: optional upstream gradient of cache["probs"] (someone
    read the attention probabilities); out: optional (dq, dk, dv) arrays to write into.
    free: empty the cache as soon as its arrays are read for the last time (a backward that
    frees activations as it goes keeps its peak low this way).  record: as the reference's
    (record["attentions"] a copy: the array is worked on in place below).

    Returns (dq (B, N, F, D), dk (B, N, T, D), dv (B, N, T, D))."""
    q, k, v, probs = cache["q"], cache["k"], cache["v"], cache["probs"]
    B = q.shape[0]
    scale = cache["scale"]
    dq, dk, dv = out if out is not None else (np.empty_like(q), np.empty_like(k), np.empty_like(v))
    dprobs_total = np.empty_like(probs)                                           # (B, N, F, T)

    def through_weighted_values(a, b):
        # in the forward: context = probs v
        np.matmul(dcontext[a:b], v[a:b].transpose(0, 1, 3, 2), out=dprobs_total[a:b])
        np.matmul(probs[a:b].transpose(0, 1, 3, 2), dcontext[a:b], out=dv[a:b])
    over_batch(through_weighted_values, B)
    if dprobs is not None:
        dprobs_total += dprobs
    if record is not None:
        record["attentions"] = dprobs_total.copy()                                # (B, N, F, T)
        record["head_mask"] = head_mask_grad(dprobs_total, cache["softmax"], cache["dropout"], dropout_backward)
    # in the forward: probs = dropout(softmax(scores)) * head_mask
    if cache["head_mask"] is not None:
        dprobs_total *= np.asarray(cache["head_mask"], dtype=q.dtype)[None, :, None, None]
    dprobs_total = dropout_backward(dprobs_total, cache["dropout"])
    softmax_out = cache["softmax"]

    def through_softmax(a, b):
        softmax_backward(dprobs_total[a:b], softmax_out[a:b], out=dprobs_total[a:b])
        # in the forward: scores = q k^T * scale (+ a constant mask)
        dprobs_total[a:b] *= scale
    over_batch(through_softmax, B)
    dscores = dprobs_total                                                        # (B, N, F, T)
    del dprobs_total, probs, softmax_out, v
    if free:
        cache.clear()                                   # from here on only q and k are read

    def through_scores(a, b):
        np.matmul(dscores[a:b], k[a:b], out=dq[a:b])                              # (b-a, N, F, D)
        np.matmul(dscores[a:b].transpose(0, 1, 3, 2), q[a:b], out=dk[a:b])       # (b-a, N, T, D)
    over_batch(through_scores, B)
    return dq, dk, dv
