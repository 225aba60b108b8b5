"""Embedding lookup: out = W[ids].

    ids: (B, T) integers in [0, V)   W: (V, C)   out: (B, T, C)

The fast path's twin (the scatter-add as a one-hot GEMM when few rows are hit) is
npbert/fast/embedding.py.
"""
import numpy as np


def embedding_forward(ids, weight):
    """(B, T) ids -> (B, T, C) rows of `weight`.  Ids must already be range-checked."""
    return weight[ids], (ids, weight.shape)


def embedding_backward(dout, cache, padding_idx=None):
    """Scatter-add: dW[v] = sum of dout over the positions where ids == v.

    In the forward: out[b, t] = W[ids[b, t]].  A row looked up twice collects both gradients,
    so the sum is np.add.at (`dW[ids] += dout` would keep only one of the repeated updates).
    The `padding_idx` row gets no gradient, as torch's `nn.Embedding(padding_idx=...)`.
    Returns dW, shaped like W."""
    ids, weight_shape = cache
    dweight = np.zeros(weight_shape, dtype=dout.dtype)                            # (V, C)
    np.add.at(dweight, ids.reshape(-1), dout.reshape(-1, weight_shape[1]))        # (M,) ids, (M, C) rows
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight
