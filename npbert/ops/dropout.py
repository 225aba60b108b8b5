"""Inverted dropout, as torch.nn.functional.dropout: keep with probability 1-p, scale by 1/(1-p).

    x, y: any shape.  The keep-mask comes from an explicit np.random.Generator and is kept in the cache.

The mask is drawn as raw 32-bit integers u (two per 64-bit draw of a bit generator): keep where
u >= round(p * 2^32), i.e. with probability 1 - p to within 2^-33.  That is half the work of
drawing floats in [0, 1) and comparing them to p (measured: 21 ms against 38 ms for the
(32, 12, 128, 128) attention probabilities of a MiniLM batch).

A mask of up to _PIECE elements is drawn from the caller's generator itself.  A larger one is
drawn in pieces of _PIECE elements on npbert's threads: the caller's generator gives one 64-bit
seed s, and piece k comes from PCG64(SeedSequence([s, k])).  The pieces sit on a fixed grid, so
the mask depends on the generator's state and the shape only, not on the number of threads, and
the caller's generator moves on by one draw: the next mask starts from a fresh seed.
"""
import numpy as np

from .parallel import parallel_for

_PIECE = 1 << 17                 # mask elements per stream (a 64 KiB draw of raw bits)
_PARALLEL_MIN = 1 << 16          # elements: smaller arrays are multiplied in the calling thread


def dropout_forward(x, p, rng, training):
    """Returns (y, cache).  In eval mode, or with p == 0, y is x itself and the cache is None."""
    if not training or p == 0.0:
        return x, None
    if p >= 1.0:                                          # torch: everything dropped, gradient 0
        return np.zeros_like(x), (None, x.dtype.type(0.0))
    keep = keep_mask(rng, x.shape, p)
    scale = x.dtype.type(1.0 / (1.0 - p))
    return _masked_scale(x, keep, scale), (keep, scale)   # y = x * keep / (1 - p)


def dropout_backward(dy, cache):
    if cache is None:
        return dy
    keep, scale = cache
    if keep is None:
        return np.zeros_like(dy)
    return _masked_scale(dy, keep, scale)                 # dx = dy * keep / (1 - p)


def _masked_scale(x, keep, scale):
    """x * keep * scale (keep boolean, x's shape), split over npbert's threads when large.
    Elementwise, so the result is the same for any split."""
    if x.size < _PARALLEL_MIN or not x.flags.c_contiguous:
        y = x * keep
        y *= scale
        return y
    y = np.empty_like(x)
    xf, kf, yf = x.reshape(-1), keep.reshape(-1), y.reshape(-1)

    def work(lo, hi):
        np.multiply(xf[lo:hi], kf[lo:hi], out=yf[lo:hi])
        yf[lo:hi] *= scale
    parallel_for(work, x.size)
    return y


def substream(seed, k):
    """Bit generator k of the family seeded by `seed` (one 64-bit draw of a caller's generator):
    PCG64(SeedSequence([seed, k])).  A large mask's pieces draw from these, and so do the
    encoder's batch halves (modeling/encoder.py)."""
    return np.random.PCG64(np.random.SeedSequence([seed, k]))


def keep_mask(rng, shape, p):
    """Boolean (shape) mask, True with probability 1 - p: raw uint32 draws u >= round(p 2^32)."""
    n = int(np.prod(shape))
    threshold = np.uint32(min(round(p * 2.0 ** 32), 2 ** 32 - 1))
    if n <= _PIECE:
        raw = rng.bit_generator.random_raw((n + 1) // 2)           # (ceil(n/2),) uint64
        u = raw.view(np.uint32)[:n].reshape(shape)                # two uint32 per uint64
        return u >= threshold
    seed = int(rng.bit_generator.random_raw())                    # one draw from the caller's generator
    keep = np.empty(n, dtype=bool)

    def pieces(first, last):                                      # pieces [first, last)
        for k in range(first, last):
            lo, hi = k * _PIECE, min(n, (k + 1) * _PIECE)
            raw = substream(seed, k).random_raw((hi - lo + 1) // 2)
            np.greater_equal(raw.view(np.uint32)[:hi - lo], threshold, out=keep[lo:hi])
    parallel_for(pieces, -(-n // _PIECE))
    return keep.reshape(shape)
