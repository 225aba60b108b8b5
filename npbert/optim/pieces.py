"""The fast path's way of running an elementwise optimizer kernel over a large parameter: in
cache-sized pieces on npbert's threads, checking the gradient for nan/inf on the way.

Each thread takes one contiguous run of the flattened arrays and walks it a piece at a time, so
the kernel's dozen passes over a piece read and write the cache rather than memory, and the
check of the gradient reads a piece that is already there.  The kernel is elementwise, so the
numbers do not depend on the pieces or the threads.
"""
import numpy as np

from npbert.fast.parallel import parallel_for

from .optimizer import all_finite

PARALLEL_MIN = 1 << 16          # elements: smaller parameters are updated whole in the calling thread
PIECE = 1 << 16                 # elements per piece: a piece's five or six arrays stay in cache between passes


def update_in_pieces(kernel, arrays, grad):
    """kernel(*pieces) over `arrays` (shaped like the parameter; None entries are passed as
    None), threaded in pieces when large and contiguous, else whole.  `grad` is the index of
    the gradient in `arrays`.  Returns whether the gradient was all finite."""
    present = [a for a in arrays if a is not None]
    size = present[0].size
    if size < PARALLEL_MIN or not all(a.flags.c_contiguous for a in present):
        kernel(*arrays)
        return all_finite(arrays[grad])
    flat = [None if a is None else a.reshape(-1) for a in arrays]      # views: pieces are written in place
    nonfinite = []

    def run(lo, hi):
        with np.errstate(invalid="ignore"):          # a nan gradient: reported once, by name, by step()
            for a in range(lo, hi, PIECE):
                b = min(a + PIECE, hi)
                kernel(*(None if x is None else x[a:b] for x in flat))
                if not all_finite(flat[grad][a:b]):
                    nonfinite.append(a)
    parallel_for(run, size)
    return not nonfinite
