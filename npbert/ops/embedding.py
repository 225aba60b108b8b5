"""Embedding lookup: out = W[ids].

    ids: (B, T) integers in [0, V)   W: (V, C)   out: (B, T, C)
"""
import numpy as np

# Up to this many distinct ids, the scatter-add runs as a one-hot GEMM (its cost grows with the
# number of distinct ids; np.add.at's does not, and costs about as much as ~700 of them).
_ONE_HOT_MAX_ROWS = 256


def embedding_forward(ids, weight):
    """(B, T) ids -> (B, T, C) rows of `weight`.  Ids must already be range-checked."""
    return weight[ids], (ids, weight.shape)


def embedding_backward(dout, cache, padding_idx=None):
    """Scatter-add: dW[v] = sum of dout over the positions where ids == v.

    The `padding_idx` row gets no gradient, as torch's `nn.Embedding(padding_idx=...)`.
    Returns dW, shaped like W.
    """
    ids, weight_shape = cache
    flat_ids = ids.reshape(-1)                                               # (M,), M = B * T
    d = dout.reshape(-1, weight_shape[1])                                    # (M, C)
    dweight = np.zeros(weight_shape, dtype=dout.dtype)                       # (V, C)
    rows, inverse = np.unique(flat_ids, return_inverse=True)                 # (U,) distinct ids, (M,)
    if len(rows) <= _ONE_HOT_MAX_ROWS:
        # Few distinct rows (positions, token types): the same sums as one GEMM with a
        # (U, M) one-hot matrix, much faster than np.add.at's element-wise path.
        one_hot = (inverse.reshape(-1)[None, :] == np.arange(len(rows))[:, None]).astype(dout.dtype)
        dweight[rows] = one_hot @ d                                          # (U, C)
    else:
        np.add.at(dweight, flat_ids, d)                                      # repeated ids add up
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight
