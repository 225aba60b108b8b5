"""Inverted dropout, as torch.nn.functional.dropout: keep with probability 1-p, scale by 1/(1-p).

    y = x * keep / (1 - p)        x, y: any shape; keep: a boolean mask of x's shape, cached

The mask is drawn as raw 32-bit integers u (two per 64-bit draw of a bit generator): keep where
u >= round(p * 2^32), i.e. with probability 1 - p to within 2^-33.  It comes from one of two
sources, the `rng` argument:

- an np.random.Generator: u is its next ceil(n/2) raw draws, in C order over the mask.
- a DropoutKey(seed, site, first_row): what a model passes.  Row r of the mask (the first axis
  is the batch) is a pure function of the training step's seed (one 64-bit draw from the
  model's generator per forward), the site's name (the transformers module path of the
  nn.Dropout, e.g. "encoder.layer.3.attention.self.dropout"), the row's global index
  first_row + r and the row's shape:

      bits = PCG64(SeedSequence([seed, site_id]))      one stream per site and step
      u    = the words [g W, (g + 1) W) of bits        g = first_row + r, W = ceil(n_row / 2)

  so the whole batch, two halves on two threads or rows spread over processes draw the same
  masks for the same rows.  (PCG64.advance jumps to word g W in O(log) time.)

The fast path's twin (the same bits drawn on threads, the multiply split over threads) is
npbert/fast/dropout.py.
"""
import hashlib
from functools import lru_cache
from typing import NamedTuple

import numpy as np


class DropoutKey(NamedTuple):
    """What a dropout mask belongs to: its training step, its site and where its rows sit."""
    seed: int           # the training step's seed: one 64-bit draw from the model's generator
    site: str           # the nn.Dropout's module path, e.g. "encoder.layer.3.attention.self.dropout"
    first_row: int = 0  # the global index of the batch's first row


def dropout_forward(x, p, rng, training):
    """Returns (y, cache).  In eval mode, or with p == 0, y is x itself and the cache is None.
    rng: an np.random.Generator or a DropoutKey (see above)."""
    if not training or p == 0.0:
        return x, None
    if p >= 1.0:                                          # torch: everything dropped, gradient 0
        return np.zeros_like(x), (None, x.dtype.type(0.0))
    keep = keep_mask(rng, x.shape, p)                     # (x.shape) bool
    scale = x.dtype.type(1.0 / (1.0 - p))
    return x * keep * scale, (keep, scale)


def dropout_backward(dy, cache):
    """In the forward: y = x * keep * scale, scale = 1 / (1 - p).   dx = dy * keep * scale."""
    if cache is None:
        return dy
    keep, scale = cache
    if keep is None:
        return np.zeros_like(dy)
    return dy * keep * scale


def threshold_for(p):
    """round(p 2^32) as uint32: u >= it has probability 1 - p for a uniform 32-bit u."""
    return np.uint32(min(round(p * 2.0 ** 32), 2 ** 32 - 1))


def keep_mask(rng, shape, p):
    """Boolean (shape) mask, True with probability 1 - p: raw uint32 draws u >= round(p 2^32)."""
    if isinstance(rng, DropoutKey):
        return keyed_keep_mask(rng, shape, p)
    if rng is None:
        raise ValueError("dropout in training needs a generator: pass rng=np.random.default_rng(seed)")
    n = int(np.prod(shape))
    raw = rng.bit_generator.random_raw((n + 1) // 2)                 # (ceil(n/2),) uint64
    u = raw.view(np.uint32)[:n].reshape(shape)                      # two uint32 per uint64
    return u >= threshold_for(p)


def keyed_keep_mask(key, shape, p):
    """The mask of rows [key.first_row, key.first_row + shape[0]) of site key.site in step
    key.seed: row r from words [r W, (r + 1) W) of the site's stream, W = ceil(n_row / 2)."""
    rows, n_row = (shape[0], int(np.prod(shape[1:]))) if len(shape) else (1, 1)   # a scalar: one row
    words = (n_row + 1) // 2                                        # W, 64-bit words per row
    bits = site_stream(key.seed, key.site)
    bits.advance(key.first_row * words)                             # row first_row starts here
    raw = bits.random_raw(rows * words)                             # (rows * W,) uint64
    u = raw.view(np.uint32).reshape(rows, 2 * words)[:, :n_row]    # (rows, n_row)
    return (u >= threshold_for(p)).reshape(shape)


def site_stream(seed, site):
    """The bit generator of dropout site `site` in the step seeded by `seed`:
    PCG64(SeedSequence([seed, site_id])), site_id a 64-bit hash of the name (the same in every
    process, unlike Python's hash())."""
    return np.random.PCG64(np.random.SeedSequence([int(seed), site_id(site)]))


@lru_cache(maxsize=4096)
def site_id(site):
    """The first 8 bytes of BLAKE2b(site name), as an integer."""
    return int.from_bytes(hashlib.blake2b(site.encode("utf-8"), digest_size=8).digest(), "little")
