"""The fast path's embedding backward.  It computes what npbert/ops/embedding.py computes,

    dW[v] = sum of dout[b, t] over the positions where ids[b, t] == v        dW: (V, C)

but when few distinct rows are hit (the position and token-type tables, a short batch) the
scatter-add runs as one GEMM with a (U, M) one-hot matrix instead of np.add.at: the same sums
in BLAS's order (equal to round-off), much faster.  With more distinct rows it is np.add.at,
as the reference (bit-equal).  The forward is the reference's lookup; the cache is the same.
"""
import numpy as np

from npbert.ops.embedding import embedding_forward  # noqa: F401 (the fast path's forward is the lookup)

# Up to this many distinct ids, the scatter-add runs as a one-hot GEMM (its cost grows with the
# number of distinct ids; np.add.at's does not, and costs about as much as ~700 of them).
_ONE_HOT_MAX_ROWS = 256


def embedding_backward(dout, cache, padding_idx=None):
    """dW[v] = sum of dout over the positions where ids == v, as npbert/ops/embedding.py's
    embedding_backward; the `padding_idx` row gets no gradient.  Returns dW, shaped like W."""
    ids, weight_shape = cache
    flat_ids = ids.reshape(-1)                                               # (M,), M = B * T
    d = dout.reshape(-1, weight_shape[1])                                    # (M, C)
    dweight = np.zeros(weight_shape, dtype=dout.dtype)                       # (V, C)
    rows, inverse = np.unique(flat_ids, return_inverse=True)                 # (U,) distinct ids, (M,)
    if len(rows) <= _ONE_HOT_MAX_ROWS:
        one_hot = (inverse.reshape(-1)[None, :] == np.arange(len(rows))[:, None]).astype(dout.dtype)   # (U, M)
        dweight[rows] = one_hot @ d                                          # (U, C)
    else:
        np.add.at(dweight, flat_ids, d)                                      # repeated ids add up
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight
