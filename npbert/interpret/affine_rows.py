"""Rows on straight lines, kept as the lines: the batch npbert.interpret's integrated gradients
feeds the encoder (the points x' + alpha (x - x') between a baseline and an input), written down
so that the first linear map after it can be taken on the two ends instead of on every point.

    base, delta   (B, T, H)    per example: the baseline x' and x - x'
    alphas        (S,)         the points along the line
    row r = s B + b            (step-major, as captum stacks its scaled inputs), R = S B rows:

        value[r] = base[b] + alphas[s] * delta[b]                        (R, T, H)   materialize

A linear map of the rows is affine along each line:

        value[r] W^T + c = (base[b] W^T + c) + alphas[s] (delta[b] W^T)   (R, T, O)   linear

so the first layer's query, key and value projections of all R rows take two GEMMs of B rows
instead of one of R rows (the sum is the same up to round-off).  Backward: the gradient of
sum_r <g_r, value[r]> with respect to base is each example's row gradients summed over its S
copies (sum_by_example), and the integrated gradients' weighted sum over the points is that
sum when each row's upstream gradient was scaled by its point's weight (the backward is linear
in its upstream).  An AffineRows may stand for a run of rows [start, stop) of the R (rows): a
half of the batch on its own thread.
"""
import numpy as np


class AffineRows:
    """Rows [start, stop) of value[r] = base[r % B] + alphas[r // B] * delta[r % B]."""

    def __init__(self, base, delta, alphas, start=0, stop=None):
        base, delta = np.asarray(base), np.asarray(delta)
        if base.ndim < 2 or base.shape != delta.shape or base.dtype != delta.dtype:
            raise ValueError(f"AffineRows: base and delta must be arrays of one shape (B, ...) and dtype, got "
                             f"{base.dtype} {base.shape} and {delta.dtype} {delta.shape}")
        alphas = np.asarray(alphas, dtype=np.float64).reshape(-1)                   # (S,)
        R = alphas.size * base.shape[0]
        stop = R if stop is None else stop
        if not 0 <= start <= stop <= R:
            raise ValueError(f"AffineRows: rows [{start}, {stop}) are not within the {R} rows")
        self.base, self.delta, self.alphas = base, delta, alphas
        self.start, self.stop = int(start), int(stop)

    @property
    def num_examples(self):
        return self.base.shape[0]

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def shape(self):
        return (self.stop - self.start,) + self.base.shape[1:]

    def __len__(self):
        return self.stop - self.start

    def rows(self, a, b):
        """Rows [a, b) of these rows, as an AffineRows."""
        if not 0 <= a <= b <= len(self):
            raise ValueError(f"AffineRows.rows: [{a}, {b}) is not within these {len(self)} rows")
        return AffineRows(self.base, self.delta, self.alphas, self.start + a, self.start + b)

    def _examples_and_alphas(self):
        """Each row's example index (n,) and its alpha (n, 1, ..., 1) in the rows' dtype."""
        r = np.arange(self.start, self.stop)                                        # (n,)
        B = self.num_examples
        alpha = self.alphas[r // B].astype(self.dtype)                              # alphas rounded once
        return r % B, alpha.reshape((-1,) + (1,) * (self.base.ndim - 1))

    def _along(self, at_base, step):
        """at_base[b] + alpha * step[b] for each row (b its example)."""
        example, alpha = self._examples_and_alphas()
        if self.num_examples > 1:
            at_base, step = at_base[example], step[example]   # (n, ...) each; one example: broadcast
        out = np.multiply(alpha, step)                       # (n, ...)
        out += at_base                                       # = at_base + alpha * step, in its memory
        return out

    def materialize(self):
        """The rows themselves (n, T, H): base + alpha * delta, rounded as the points would be."""
        return self._along(self.base, self.delta)

    def linear(self, weight, bias=None):
        """The rows times W^T plus c, (n, T, O), from the two ends: (base W^T + c) + alpha (delta W^T).
        weight (O, H), bias (O,) or None; torch's layout, as npbert/ops/linear.py."""
        at_base = self.base @ weight.T                                              # (B, T, O)
        if bias is not None:
            at_base += bias
        return self._along(at_base, self.delta @ weight.T)                           # (n, T, O)

    def sum_by_example(self, g):
        """sum over each example's rows of g (n, ...), (B, ...): materialize's backward to base
        (an example with no row here gets zeros)."""
        if g.shape[0] != len(self):
            raise ValueError(f"AffineRows.sum_by_example: {g.shape[0]} rows of gradient for {len(self)} rows")
        B = self.num_examples
        out = np.zeros((B,) + g.shape[1:], dtype=g.dtype)                            # (B, ...)
        for b in range(B):
            first = (b - self.start) % B             # example b's rows here: first, first + B, ...
            if first < len(self):
                np.sum(g[first::B], axis=0, out=out[b])
        return out
