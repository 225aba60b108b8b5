"""The tiled attention's dropout masks (npbert/fast/tiled_attention.py), drawn block by block
from where each block sits in the stream the reference draws the whole mask from, never stored.
docs/long_sequences.md, section 4, says how."""
import numpy as np

from npbert.ops.dropout import DropoutKey, keep_mask, site_stream, threshold_for


class _Dropout:
    """The dropout masks of a (B, N, F, T) probability array, block by block, never stored:
    keep(b, h0, h1, f0, f1) is mask[b, h0:h1, f0:f1, :] (n, Fb, T) as npbert/ops/dropout.py's
    keep_mask(rng, (B, N, F, T), p) draws it: the uint32 draws u at flat positions

        c + (h F + f) T + t        c = the first position of batch row b in the stream

    with c = (first_row + b) 2W for a DropoutKey (W = ceil(N F T / 2) words a row) and
    c = b N F T for a caller's generator (the whole mask in C order); word c // 2, half c % 2.
    A copy of the stream is advanced to each block's first word (PCG64.advance, O(log))."""

    def __init__(self, scale, shape, p=0.0, start=None, row_start=None, full=None, finish=None):
        self.scale, self.shape, self.p, self.start = scale, shape, p, start    # start: the stream's state
        self.row_start, self.full, self.finish = row_start, full, finish

    @classmethod
    def make(cls, rng, p, training, shape, dtype):
        """What dropout_forward(x (shape), p, rng, training) would do, as a plan to draw per block."""
        if not training or p == 0.0:
            return cls(dtype.type(1.0), shape)                                            # the identity
        if p >= 1.0:
            return cls(dtype.type(0.0), shape)                                            # everything dropped, no draw
        if rng is None:
            raise ValueError("attention: dropout in training needs a generator: pass rng=np.random.default_rng(seed)")
        B, N, F, T = shape
        scale = dtype.type(1.0 / (1.0 - p))
        if isinstance(rng, DropoutKey):
            row_words = (N * F * T + 1) // 2                                       # W
            return cls(scale, shape, p, site_stream(rng.seed, rng.site).state,
                       row_start=lambda b: (rng.first_row + b) * 2 * row_words)
        bits = getattr(rng, "bit_generator", None)
        if isinstance(bits, (np.random.PCG64, np.random.PCG64DXSM)):
            start = bits.state
            words = (B * N * F * T + 1) // 2                                       # what the reference draws

            def finish():                      # the generator ends where the reference's draw leaves it
                moved = type(bits)()
                moved.state = start
                moved.advance(words)
                state = moved.state
                state["has_uint32"], state["uinteger"] = start["has_uint32"], start["uinteger"]
                bits.state = state
            return cls(scale, shape, p, start, row_start=lambda b: b * N * F * T, finish=finish)
        # another bit generator (no advance): the whole mask, drawn once as the reference draws it
        return cls(scale, shape, p, full=keep_mask(rng, shape, p))

    def keep(self, b, h0, h1, f0, f1):
        """mask[b, h0:h1, f0:f1, :] (n, Fb, T) bool, or None (no dropout, or everything dropped)."""
        if self.full is not None:
            return self.full[b, h0:h1, f0:f1]
        if self.start is None:
            return None
        F, T = self.shape[2:]
        keep = np.empty((h1 - h0, f1 - f0, T), dtype=bool)                         # (n, Fb, T)
        threshold = threshold_for(self.p)
        bits = np.random.PCG64() if self.start["bit_generator"] == "PCG64" else np.random.PCG64DXSM()
        count = (f1 - f0) * T                                                      # uint32 draws a head
        for h in range(h0, h1):
            first = self.row_start(b) + (h * F + f0) * T                           # flat position of (h, f0, 0)
            bits.state = self.start
            bits.advance(first // 2)
            raw = bits.random_raw((first % 2 + count + 1) // 2)                    # the words covering them
            u = raw.view(np.uint32)[first % 2:first % 2 + count]                   # (Fb T,)
            np.greater_equal(u.reshape(f1 - f0, T), threshold, out=keep[h - h0])
        return keep

    def done(self):
        if self.finish is not None:
            self.finish()
            self.finish = None
