"""The fast path's dropout.  It computes what npbert/ops/dropout.py computes,

    y = x * keep / (1 - p)        keep: u >= round(p 2^32), u raw uint32 draws

with the same bits and the same arithmetic (bit-equal, tested), but a large mask keyed by a
DropoutKey is drawn in pieces on npbert's threads, and a large multiply is split over them.
Piece k of the words a batch needs, [first_row W + k P, first_row W + (k + 1) P) of the site's
stream (W words per row, P = _PIECE_WORDS), comes from a copy of the stream advanced to its
first word (PCG64.advance): the same bits as one draw, whatever the thread count.  A mask from a
caller's np.random.Generator is that generator's next draws, in order, as in the reference.
"""
import numpy as np

from npbert.ops import dropout as reference
from npbert.ops.dropout import DropoutKey, site_stream, threshold_for

from .parallel import parallel_for

_PIECE_WORDS = 1 << 16           # 64-bit words per piece: 2^17 mask elements, a 512 KiB draw
_PARALLEL_MIN = 1 << 16          # elements: smaller arrays are multiplied in the calling thread


def dropout_forward(x, p, rng, training):
    """y = x * keep * (1 / (1 - p)), as npbert/ops/dropout.py's dropout_forward (the same masks).
    Returns (y, cache); y is x itself and the cache None in eval or with p == 0."""
    if not training or p == 0.0 or p >= 1.0:
        return reference.dropout_forward(x, p, rng, training)    # the identity, or everything dropped
    keep = keep_mask(rng, x.shape, p)
    scale = x.dtype.type(1.0 / (1.0 - p))
    return _masked_scale(x, keep, scale), (keep, scale)   # y = x * keep * (1 / (1 - p))


def dropout_backward(dy, cache):
    """In the forward: y = x * keep * scale.   dx = dy * keep * scale."""
    if cache is None or cache[0] is None:
        return reference.dropout_backward(dy, cache)             # the identity, or all zeros
    keep, scale = cache
    return _masked_scale(dy, keep, scale)


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


def keep_mask(rng, shape, p):
    """keep = u >= round(p 2^32), u the raw uint32 draws of npbert/ops/dropout.py's keep_mask (the
    same bits); those of a DropoutKey drawn in pieces on threads.  Boolean, of `shape`."""
    if not isinstance(rng, DropoutKey):
        return reference.keep_mask(rng, shape, p)
    rows, n_row = (shape[0], int(np.prod(shape[1:]))) if len(shape) else (1, 1)
    words = (n_row + 1) // 2                                   # W, 64-bit words per row
    total = rows * words
    first_word = rng.first_row * words
    threshold = threshold_for(p)
    stream = site_stream(rng.seed, rng.site)
    if total <= _PIECE_WORDS:                                  # one piece: no thread, no copy
        stream.advance(first_word)
        u = stream.random_raw(total).view(np.uint32).reshape(rows, 2 * words)
        return (u[:, :n_row] >= threshold).reshape(shape)
    start = stream.state
    even = n_row % 2 == 0                                      # rows fill their words: u is the mask
    raw = None if even else np.empty(total, dtype=np.uint64)
    keep = np.empty(rows * n_row if even else 0, dtype=bool)

    def pieces(first, last):                                   # pieces [first, last)
        bits = np.random.PCG64()
        for k in range(first, last):
            lo, hi = k * _PIECE_WORDS, min(total, (k + 1) * _PIECE_WORDS)
            bits.state = start
            bits.advance(first_word + lo)
            piece = bits.random_raw(hi - lo)
            if even:
                np.greater_equal(piece.view(np.uint32), threshold, out=keep[2 * lo:2 * hi])
            else:
                raw[lo:hi] = piece
    parallel_for(pieces, -(-total // _PIECE_WORDS))
    if even:
        return keep.reshape(shape)
    u = raw.view(np.uint32).reshape(rows, 2 * words)[:, :n_row]   # (rows, n_row): each row's half-word dropped
    return (u >= threshold).reshape(shape)
