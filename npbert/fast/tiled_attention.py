"""Attention in tiles (FlashAttention's algorithm on the CPU).  It computes what
npbert/ops/attention.py computes,

    scores  = q k^T * scale + mask                      (B, N, F, T)
    probs   = dropout(softmax(scores)) * head_mask      (B, N, F, T)
    context = probs v                                   (B, N, F, D)

without ever holding a (B, N, F, T) array: the queries in blocks of `block` rows, and for each
the keys in blocks of `block` columns, with an online softmax (a running max m and sum l per
query row) in the forward, and the probabilities of each block recomputed from m and log l in
the backward.  What it keeps for the backward: q, k, v, the context and two (B, N, F) arrays.
Derived step by step in docs/long_sequences.md.

Dropout masks are never stored either: each block's bits are drawn again, in the forward and in
the backward, from where they sit in the stream the non-tiled ops draw the whole mask from
(npbert/ops/dropout.py: a DropoutKey's site stream, or an np.random.Generator with PCG64 bits),
so the masks are the reference's, bit for bit (`_Dropout`, npbert/fast/tiled_dropout.py).  Work is split over (batch row, group of heads)
on npbert's threads, one BLAS thread each; every task computes its numbers alone, so the thread
count changes nothing.

No `record=` and no `dprobs=`: the probabilities do not exist here.  output_attentions and the
interpret features take the full path (npbert/fast/attention.py).
"""
import math

import numpy as np

from npbert.ops.attention import check_attention_inputs

from .parallel import get_num_threads, over_batch
from .tiled_dropout import _Dropout

DEFAULT_BLOCK = 128          # query rows and key columns per tile (64 to 512 measured: docs/long_sequences.md)


def tiled_attention_forward(q, k, v, mask=None, head_mask=None, dropout_p=0.0, rng=None, training=False,
                            scale=None, block=DEFAULT_BLOCK, out=None):
    """context = dropout(softmax(q k^T * scale + mask)) * head_mask @ v, as npbert/ops/attention.py's
    attention_forward (the same arguments and masks; `block`: query rows and key columns per tile,
    an int or a pair (query block, key block); `out`: an optional (B, N, F, D) array for the context).

    For each batch row b, group of heads and block of query rows Q_i (queries f in [f0, f1)):
        m = -inf, l = 0, acc = 0                                            (n, Fb, 1) (n, Fb, 1) (n, Fb, D)
        for each block of keys K_j, V_j (keys t in [t0, t1)):
            S     = Q_i K_j^T * scale + mask                                (n, Fb, Tb)
            m_new = max(m, rowmax(S))                                       (n, Fb, 1)
            E     = exp(S - m_new)                                          (n, Fb, Tb)
            l     = l exp(m - m_new) + rowsum(E)                            (n, Fb, 1)
            acc   = acc exp(m - m_new) + (E * keep_j) V_j                   (n, Fb, D)
            m     = m_new
        context = acc / l * dropout_scale * head_mask                       (n, Fb, D)

    Returns (context (B, N, F, D), cache).  The cache holds q, k, v, the context (read again by
    the backward: the caller must not overwrite it before then), m and log l (B, N, F) each
    (the log-sum-exp m + log l, kept in its two parts: docs/long_sequences.md says why), and what regenerates
    the dropout masks."""
    mask = check_attention_inputs(q, k, v, mask, head_mask)
    if mask is not None and not mask.any():
        mask = None                         # all zeros (nothing masked): adding it changes no score
    B, N, F, D = q.shape
    T = k.shape[2]
    scale = q.dtype.type(D ** -0.5 if scale is None else scale)
    block_q, block_k = _blocks(block)
    drop = _Dropout.make(rng, dropout_p, training, (B, N, F, T), q.dtype)
    # what multiplies each head's probabilities after the softmax: 1 / (1 - p) and head_mask[n]
    after = np.full(N, drop.scale, dtype=q.dtype) if head_mask is None else \
        drop.scale * np.asarray(head_mask, dtype=q.dtype)                           # (N,)
    context = np.empty((B, N, F, D), dtype=q.dtype) if out is None else out         # (B, N, F, D)
    row_max = np.empty((B, N, F), dtype=q.dtype)                                    # m
    log_sum = np.empty((B, N, F), dtype=q.dtype)                                    # log l
    tasks = _tasks(B, N)

    limit = math.log(np.finfo(q.dtype).max) - math.log(max(T, 1)) - 1             # exps below max / (e T)

    def work(first, last):
        buffers = (np.empty(N * block_q * block_k, q.dtype), np.empty(N * block_q * D, q.dtype),  # S tile, E V
                   np.ones((block_k, 1), q.dtype))                                             # for rowsum(E)
        for b, h0, h1 in tasks[first:last]:
            heads = slice(h0, h1)
            key_norm = np.sqrt(np.einsum("ntd,ntd->nt", k[b, heads], k[b, heads]).max(axis=1))      # (n,) max |k_t|
            finite = np.isfinite(key_norm).all() and np.isfinite(v[b, heads]).all()
            for f0 in range(0, F, block_q):
                f1 = min(F, f0 + block_q)
                qi, part = q[b, heads, f0:f1] * scale, _mask_rows(mask, b, heads, f0, f1)
                top = None if part is None else part.max(axis=-1)                  # each row's largest mask entry
                cols = _key_blocks(part, T, block_k, finite and np.isfinite(qi).all(), top)
                rows = (qi, k[b, heads], v[b, heads], part, drop.keep(b, h0, h1, f0, f1), after[heads, None, None],
                        cols, buffers, context[b, heads, f0:f1], row_max[b, heads, f0:f1], log_sum[b, heads, f0:f1])
                if not (_cannot_overflow(qi, key_norm, top, limit) and _forward_rows_unshifted(*rows)):
                    _forward_rows(*rows)
    over_batch(work, len(tasks))
    drop.done()                             # a caller's generator: moved on as the reference moves it
    cache = dict(q=q, k=k, v=v, context=context, row_max=row_max, log_sum=log_sum, mask=mask, scale=scale,
                 after=after, dropout=drop, block=(block_q, block_k))
    return context, cache


def _cannot_overflow(qi, key_norm, mask_top, limit):
    """Whether no score of this block of query rows can exceed `limit` (so that exp(S) with no
    max subtracted cannot overflow, even summed over T keys): |q_f . k_t| * scale <= |q_f * scale|
    max_t |k_t| (Cauchy-Schwarz), plus the row's largest mask entry.  qi (n, Fb, D) multiplied by
    scale, key_norm (n,), mask_top: the max over the keys of a mask part from _mask_rows
    ((n or 1, Fb or 1)), or None.  False for NaN, as for a bound too large; either way
    _forward_rows (the running max) takes the block."""
    bound = np.sqrt(np.einsum("nfd,nfd->nf", qi, qi)) * key_norm[:, None]          # (n, Fb)
    if mask_top is not None:
        bound = bound + mask_top                                                   # (n or 1, Fb or 1) broadcast
    return bool(np.all(bound <= limit))


def _forward_rows_unshifted(qi, k, v, mask, keep, after, cols, buffers, context, row_max, log_sum):
    """tiled_attention_forward's loop with m = 0 throughout, where _cannot_overflow says no
    exp(S) can overflow: softmax(S) = exp(S) / rowsum(exp(S)) (a constant subtracted from a row
    changes nothing), so there is no running max to find, subtract or rescale by:

        l   += rowsum(E),  E = exp(S)                                       (n, Fb, 1)
        acc += (E * keep_j) V_j                                             (n, Fb, D)

    Arguments and outputs as _forward_rows's (row_max written as 0).  Returns False, having
    written nothing, if some row's sum l is below 2^-20 (every score far below 0: its
    exps lose bits to underflow, or are all 0 where every key is masked): the caller then runs
    _forward_rows, whose shifted exps give the reference's numbers there."""
    n, Fb, D = qi.shape
    s_buffer, product, ones = buffers
    l = np.zeros((n, Fb, 1), dtype=qi.dtype)                                       # sum of exps
    acc = np.zeros((n, Fb, D), dtype=qi.dtype)                                     # (E * keep) V so far
    for t0, t1 in cols:
        s = np.matmul(qi, k[:, t0:t1].transpose(0, 2, 1), out=_tile(s_buffer, (n, Fb, t1 - t0)))   # Q_i K_j^T * scale
        _add_mask(s, mask, t0, t1)                                                 # (n, Fb, Tb) = S
        e = np.exp(s, out=s)                                                       # (n, Fb, Tb) = E
        l += np.matmul(e, ones[:t1 - t0])                                          # rowsum(E), before dropout
        if keep is not None:
            e *= keep[:, :, t0:t1]
        acc += np.matmul(e, v[:, t0:t1], out=_tile(product, (n, Fb, D)))          # (n, Fb, D)
    if not l.min(initial=1) >= 2.0 ** -20:
        return False
    np.multiply(acc, after / l, out=context)                                       # (n, Fb, D) = acc / l * after
    row_max[...] = 0                                                               # m: nothing subtracted
    log_sum[...] = np.log(l[..., 0])                                               # (n, Fb)
    return True


def _forward_rows(qi, k, v, mask, keep, after, cols, buffers, context, row_max, log_sum):
    """One block of query rows of one batch row, a group of n heads: the loop of
    tiled_attention_forward's docstring.  qi (n, Fb, D), already multiplied by scale (Q K^T * scale
    = (Q * scale) K^T: exact for a power of two such as 64^-1/2, else one rounding of q's entries);
    k, v (n, T, D); mask broadcastable to (n, Fb, T) or None; keep (n, Fb, T) bool or None; after
    (n, 1, 1); cols: the key blocks [t0, t1) to visit (_key_blocks); buffers: flat, room for (n, Fb, block_k) and (n, Fb, D).  Writes context (n, Fb, D), row_max and
    log_sum (n, Fb)."""
    n, Fb, D = qi.shape
    s_buffer, product = buffers[:2]
    m = np.full((n, Fb, 1), -np.inf, dtype=qi.dtype)                               # running max
    l = np.zeros((n, Fb, 1), dtype=qi.dtype)                                       # running sum of exps
    acc = np.zeros((n, Fb, D), dtype=qi.dtype)                                     # running (E * keep) V
    for t0, t1 in cols:
        s = np.matmul(qi, k[:, t0:t1].transpose(0, 2, 1), out=_tile(s_buffer, (n, Fb, t1 - t0)))   # Q_i K_j^T * scale
        _add_mask(s, mask, t0, t1)                                                 # (n, Fb, Tb) + mask
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))                       # (n, Fb, 1)
        shift = _finite(m_new)                                                     # (n, Fb, 1), see _finite
        s -= shift
        e = np.exp(s, out=s)                                                       # (n, Fb, Tb) = E
        rescale = _rescale(m, shift)                                               # (n, Fb, 1), 0 on the first block
        l *= rescale
        l += np.einsum("nft->nf", e)[..., None]                                  # rowsum(E), softmax's: before dropout
        if keep is not None:
            e *= keep[:, :, t0:t1]                                                 # dropout's zeros (scale: `after`)
        acc *= rescale
        acc += np.matmul(e, v[:, t0:t1], out=_tile(product, (n, Fb, D)))          # (n, Fb, D)
        m = m_new
    np.multiply(acc, after / l, out=context)                                       # (n, Fb, D) = acc / l * after
    row_max[...] = _finite(m)[..., 0]                                              # (n, Fb)
    with np.errstate(divide="ignore"):                                             # l = 0: a row of -inf scores
        log_sum[...] = np.log(l[..., 0])                                           # (n, Fb)


def tiled_attention_backward(dcontext, cache, out=None):
    """The backward of tiled_attention_forward, block by block, recomputing each block's
    probabilities from the forward's m and log l (docs/long_sequences.md derives it):

        delta = rowsum(dcontext * context)                                  (n, Fb, 1)
        for each block of keys K_j, V_j:
            P   = exp(Q_i K_j^T * scale + mask - m - log l)                 (n, Fb, Tb), softmax(scores) there
            A   = P * keep_j * after                                        (n, Fb, Tb), probs as used
            dV_j += A^T dcontext_i                                          (n, Tb, D)
            dP  = (dcontext_i V_j^T) * keep_j * after                       (n, Fb, Tb), d softmax(scores)
            dS  = P * (dP - delta) * scale                                  (n, Fb, Tb), d(Q K^T)
            dQ_i += dS K_j                                                  (n, Fb, D)
            dK_j += dS^T Q_i                                                (n, Tb, D)

    (`after` = 1 / (1 - p) * head_mask[n]; rowsum(dP * P) = rowsum(dcontext * context) holds with
    dropout and head mask too.)  dcontext: (B, N, F, D); out: optional (dq, dk, dv) arrays to
    write into.  Returns (dq (B, N, F, D), dk (B, N, T, D), dv (B, N, T, D)), as the reference's."""
    q, k, v, context = cache["q"], cache["k"], cache["v"], cache["context"]
    B, N, F, D = q.shape
    T = k.shape[2]
    block_q, block_k = cache["block"]
    mask, drop, after = cache["mask"], cache["dropout"], cache["after"]
    dq, dk, dv = out if out is not None else (np.empty_like(q), np.empty_like(k), np.empty_like(v))
    tasks = _tasks(B, N)

    def work(first, last):
        tile = N * block_q * block_k
        buffers = (np.empty(tile, q.dtype), np.empty(tile, q.dtype),                # P; A, then dS
                   np.empty(N * max(block_q, block_k) * D, q.dtype))                # a product (n, Fb or Tb, D)
        for b, h0, h1 in tasks[first:last]:
            heads = slice(h0, h1)
            dk[b, heads] = 0                                                       # summed over query blocks
            dv[b, heads] = 0
            finite = np.isfinite(k[b, heads]).all() and np.isfinite(v[b, heads]).all()   # as the forward's
            for f0 in range(0, F, block_q):
                f1 = min(F, f0 + block_q)
                rows = (b, heads, slice(f0, f1))
                qi, part = q[rows] * cache["scale"], _mask_rows(mask, b, heads, f0, f1)
                cols = _key_blocks(part, T, block_k, finite and np.isfinite(qi).all() and np.isfinite(dcontext[rows]).all())
                _backward_rows(dcontext[rows], context[rows], qi, k[b, heads], v[b, heads],
                               part, drop.keep(b, h0, h1, f0, f1),
                               after[heads, None, None], cache["scale"], cols, buffers,
                               cache["row_max"][rows], cache["log_sum"][rows], dq[rows], dk[b, heads], dv[b, heads])
    over_batch(work, len(tasks))
    return dq, dk, dv


def _backward_rows(do, o, qi, k, v, mask, keep, after, scale, cols, buffers, row_max, log_sum, dq, dk, dv):
    """One block of query rows of one batch row, a group of n heads: the loop of
    tiled_attention_backward's docstring.  do, o (n, Fb, D); qi (n, Fb, D) multiplied by scale (as
    in the forward: dK_j += dS^T Q_i with dS's factor scale in it; dQ_i's applied once at the end);
    k, v (n, T, D); row_max, log_sum (n, Fb); buffers: from tiled_attention_backward.
    Writes dq (n, Fb, D); adds into dk, dv (n, T, D)."""
    n, Fb, D = qi.shape
    p_buffer, ds_buffer, product = buffers
    plain = keep is None and bool(np.all(after == 1))                              # A = P, dP = dA
    delta = _row_dot(do, o)                                                        # (n, Fb, 1) = rowsum(dO * O)
    m, log_l = row_max[..., None], log_sum[..., None]                              # (n, Fb, 1) each
    shifted = bool(m.any())                                                        # m = 0: unshifted forward
    dq[...] = 0
    for t0, t1 in cols:
        Tb = t1 - t0
        # in the forward: S = Q_i K_j^T * scale + mask, P = exp(S - m) / l
        p = np.matmul(qi, k[:, t0:t1].transpose(0, 2, 1), out=_tile(p_buffer, (n, Fb, Tb)))   # Q_i K_j^T * scale
        _add_mask(p, mask, t0, t1)                                                 # (n, Fb, Tb) = S
        if shifted:
            p -= m
        p -= log_l
        np.exp(p, out=p)                                                           # P
        # in the forward: context = A V, A = P * keep * after
        a = p if plain else np.multiply(p, after, out=_tile(ds_buffer, (n, Fb, Tb)))
        if keep is not None:
            a *= keep[:, :, t0:t1]                                                 # (n, Fb, Tb) = A
        dv[:, t0:t1] += np.matmul(a.transpose(0, 2, 1), do, out=_tile(product, (n, Tb, D)))   # A^T dO
        ds = np.matmul(do, v[:, t0:t1].transpose(0, 2, 1), out=_tile(ds_buffer, (n, Fb, Tb)))  # dA
        if not plain:
            ds *= after
            if keep is not None:
                ds *= keep[:, :, t0:t1]                                            # dP
        ds -= delta
        ds *= p                                                                    # P * (dP - delta) = dS / scale
        dq += np.matmul(ds, k[:, t0:t1], out=_tile(product, (n, Fb, D)))           # (n, Fb, D)
        dk[:, t0:t1] += np.matmul(ds.transpose(0, 2, 1), qi, out=_tile(product, (n, Tb, D)))  # dS^T Q_i
    dq *= scale                                                                    # dS K = (dS / scale) K * scale


# ---- helpers --------------------------------------------------------------------------------------

def _key_blocks(mask, T, block_k, finite, top=None):
    """The key blocks [t0, t1) a block of query rows visits: every one, less those where every
    entry of the mask part is at most finfo.min / 2 (a padding or causal mask's masked keys),
    whose exps are 0 exactly in the forward and the backward, so that they add nothing to any
    sum: their GEMMs and passes are skipped.  Only when that is exact: `finite` (no NaN or inf
    in q, k, v, nor in dcontext for the backward: 0 * NaN is NaN in the reference) and every
    query row has a key that is not masked so (a row whose keys are all masked is uniform
    over them all).  mask: a part from _mask_rows, or None; top: its max over the keys, if the
    caller has it already."""
    blocks = [(t0, min(T, t0 + block_k)) for t0 in range(0, T, block_k)]
    if mask is None or mask.shape[-1] == 1 or not finite:
        return blocks
    dead = np.finfo(mask.dtype).min / 2 if mask.dtype.kind == "f" else -np.inf
    if not np.all((mask.max(axis=-1) if top is None else top) > dead):
        return blocks
    return [(t0, t1) for t0, t1 in blocks if not np.all(mask[..., t0:t1] <= dead)]


def _blocks(block):
    """(query rows, key columns) per tile from an int or a pair; positive ints, else an error."""
    pair = (block, block) if np.ndim(block) == 0 else tuple(block)
    if len(pair) != 2 or not all(isinstance(x, (int, np.integer)) and x >= 1 for x in pair):
        raise ValueError(f"tiled attention: block must be a positive int or a pair of them, got {block!r}")
    return int(pair[0]), int(pair[1])


def _tasks(B, N):
    """(b, h0, h1): batch row b, heads [h0, h1).  Heads are split into groups only as far as
    needed to give every thread a task; a group's per-head GEMMs are the same alone or together."""
    groups = min(N, -(-get_num_threads() // B))                                    # ceil(threads / B), <= N
    bounds = [N * g // groups for g in range(groups + 1)]
    return [(b, bounds[g], bounds[g + 1]) for b in range(B) for g in range(groups)]


def _finite(m):
    """The row max to subtract: m, or 0 where m = -inf (every score so far -inf: exp(-inf - 0) = 0,
    where exp(-inf - (-inf)) would be NaN)."""
    return np.where(np.isneginf(m), 0, m).astype(m.dtype, copy=False)


def _row_dot(do, o):
    """rowsum(dO * O) (n, Fb, D), (n, Fb, D) -> (n, Fb, 1): the backward's delta, = rowsum(dP * P)."""
    return np.einsum("nfd,nfd->nf", do, o)[..., None]


def _rescale(m, m_new):
    """exp(m - m_new) (n, Fb, 1): what the sums and products so far, taken with the old row max m,
    are multiplied by to be taken with the new one.  0 while m = -inf (nothing summed yet)."""
    return np.exp(m - m_new)


def _mask_rows(mask, b, heads, f0, f1):
    """The 4-D additive mask's part for batch row b, heads, queries [f0, f1): broadcastable to
    (n, Fb, T) (axes of size 1 stay 1), or None."""
    if mask is None:
        return None
    m = mask[b if mask.shape[0] > 1 else 0]                                        # (Nm, Fm, Tm)
    m = m[heads] if m.shape[0] > 1 else m
    return m[:, f0:f1] if m.shape[1] > 1 else m


def _tile(buffer, shape):
    """A C-contiguous (shape) view of the start of a flat buffer (tiles at the edges are smaller)."""
    return buffer[:int(np.prod(shape))].reshape(shape)


def _add_mask(s, mask, t0, t1):
    """s += the mask's keys [t0, t1) (a part from _mask_rows; s (n, Fb, Tb)).  A padding mask's
    part that is all 0 (no padded key there) is not added: x + 0 = x."""
    if mask is None:
        return
    part = _cols(mask, t0, t1)
    if part.shape[-2] == 1 and not part.any():
        return
    s += part


def _cols(mask, t0, t1):
    """Keys [t0, t1) of a mask part from _mask_rows."""
    return mask[..., t0:t1] if mask.shape[-1] > 1 else mask
