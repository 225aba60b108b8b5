"""The fast path's LayerNorm.  It computes what npbert/ops/layer_norm.py computes,

    y = weight * (x - mean) / sqrt(var + eps) + bias        x, y: (..., C)   weight, bias: (C,)

with the reference's formulas row by row, its sums over a row taken as dot products (einsums,
each row's alone: a BLAS GEMV would sum a row differently by its place in the block): fewer
passes over the (M, C) data and no temporaries, equal to the reference to round-off (tests/fast).  Rows are
independent, so both passes run over blocks of rows (`_over_rows`), in cache-sized pieces spread
over npbert's threads, writing into preallocated arrays; every row gets exactly the numbers it
would alone.  Same cache as the reference: (xhat, rstd, weight).
"""
import numpy as np

from .parallel import parallel_for

_ROWS_PER_BLOCK = 256     # 256 rows x 768 float32 = 768 KiB: fewer NumPy calls (each takes the GIL), measured fastest


def _over_rows(work, n_rows):
    """work(a, b) for row blocks [a, b) of at most _ROWS_PER_BLOCK rows, over npbert's threads."""
    n_blocks = -(-n_rows // _ROWS_PER_BLOCK)

    def blocks(first, last):
        for i in range(first, last):
            work(i * _ROWS_PER_BLOCK, min((i + 1) * _ROWS_PER_BLOCK, n_rows))
    parallel_for(blocks, n_blocks)


def layer_norm_forward(x, weight, bias, eps, overwrite_x=False):
    """y = weight * (x - mean) / sqrt(var + eps) + bias, as npbert/ops/layer_norm.py's
    layer_norm_forward, row block by row block on threads.  (..., C) -> ((..., C), cache);
    the cache is (xhat, rstd, weight).  overwrite_x=True (a caller that owns a C-contiguous x
    and is done with it): xhat is written into x's memory, one array less."""
    C = x.shape[-1]
    x2 = x.reshape(-1, C)                                     # (M, C), M = prod(leading dims)
    y = np.empty_like(x2)                                     # (M, C)
    in_place = overwrite_x and x.flags.c_contiguous and x.flags.writeable    # then x2 is a view of x
    xhat = x2 if in_place else np.empty_like(x2)              # (M, C)
    rstd = np.empty((x2.shape[0], 1), dtype=x.dtype)          # (M, 1)
    eps = x.dtype.type(eps)

    inv_c = np.full(C, 1.0 / C, dtype=x.dtype)                # (C,): a row's mean is a dot product with it

    def rows(a, b):
        mean = np.einsum("mc,c->m", x2[a:b], inv_c)[:, None]  # (m, 1)
        xc = np.subtract(x2[a:b], mean, out=xhat[a:b])        # (m, C)
        var = np.einsum("mc,mc->m", xc, xc)[:, None]          # (m, 1): C var, no (m, C) temporary
        var *= inv_c[0]                                       # biased like torch
        var += eps
        r = np.divide(1.0, np.sqrt(var, out=var), out=rstd[a:b])   # (m, 1), keeps x.dtype
        xc *= r                                               # xhat = (x - mean) * rstd
        np.multiply(xc, weight, out=y[a:b])
        y[a:b] += bias
    _over_rows(rows, x2.shape[0])
    return y.reshape(x.shape), (xhat.reshape(x.shape), rstd.reshape(*x.shape[:-1], 1), weight)


def layer_norm_backward(dy, cache, param_grads=True):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, as npbert/ops/layer_norm.py's
    layer_norm_backward (derivation in docs/backward.md), in place on g, block by block.
    Returns (dx, {"weight": dweight, "bias": dbias}); param_grads=False (a frozen LayerNorm):
    (dx, {}), without the two passes over (M, C) the parameter gradients take."""
    xhat, rstd, weight = cache
    C = dy.shape[-1]
    dy2 = dy.reshape(-1, C)                                   # (M, C)
    xhat2 = xhat.reshape(-1, C)                               # (M, C)
    rstd2 = rstd.reshape(-1, 1)                               # (M, 1)
    grads = {}
    if param_grads:
        grads = {"weight": np.einsum("mc,mc->c", dy2, xhat2), "bias": dy2.sum(axis=0)}   # (C,), (C,)
    dx = np.empty_like(dy2)                                   # (M, C)

    inv_c = np.full(C, 1.0 / C, dtype=dy.dtype)               # (C,): a row's mean is a dot product with it

    def rows(a, b):
        xh, r = xhat2[a:b], rstd2[a:b]                        # (m, C), (m, 1)
        g = np.multiply(dy2[a:b], weight, out=dx[a:b])        # (m, C)
        gmean = np.einsum("mc,c->m", g, inv_c)[:, None]       # (m, 1)
        gxmean = np.einsum("mc,mc->m", g, xh)[:, None]        # (m, 1): C mean(g xhat), no temporary
        gxmean *= inv_c[0] * r                                # rstd mean(g xhat)
        g -= gmean
        g *= r                                                # rstd (g - mean(g)) ...
        g -= np.multiply(xh, gxmean)                          # ... - xhat rstd mean(g xhat)
    _over_rows(rows, dy2.shape[0])
    return dx.reshape(dy.shape), grads
