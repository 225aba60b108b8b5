"""Which implementation npbert runs: the plain reference path or the fast path.

    npbert.get_path()               -> "fast" (the default) or "reference"
    npbert.set_path("reference")    models built from now on, the tokenizer and the optimizers
                                    run their plain code
    NPBERT_PATH=reference           the same, read from the environment on first use
    model.set_path("reference")     switches a model built before (its path is fixed when it is
                                    built, as transformers' attn_implementation; a model called
                                    while another path is on runs its own, with a PathWarning)

The reference path is the code a reader follows beside transformers' `modeling_bert.py` and
Google's scripts: each op as its formula, each module as transformers' class.  The fast path
computes the same numbers (tested: float64 to round-off, bit-equal where the arithmetic is the
same) with threads, blocking and fused passes.  The environment variable is only read, never
written; nothing here runs at import.
"""
import contextlib
import os

PATHS = ("fast", "reference")


class PathWarning(UserWarning):
    """A model built on one path was called while the other path is on (it runs its own)."""

_path = None            # None: NPBERT_PATH not read yet


def _check(path, source):
    if path not in PATHS:
        raise ValueError(f"{source} must be one of {', '.join(map(repr, PATHS))}, got {path!r}")
    return path


def get_path():
    """The path in use: "fast" or "reference" (NPBERT_PATH on first use, else "fast")."""
    global _path
    if _path is None:
        _path = _check(os.environ.get("NPBERT_PATH", "fast").strip().lower() or "fast",
                       "the environment variable NPBERT_PATH")
    return _path


def set_path(path):
    """Run every model, op and tokenizer on `path` ("fast" or "reference") from now on, in
    every thread.  Returns the path that was in use before."""
    global _path
    before = get_path()
    _path = _check(path, "set_path's argument")
    return before


def is_fast():
    """True when the fast path is on."""
    return get_path() == "fast"


@contextlib.contextmanager
def using_path(path):
    """`with npbert.using_path("reference"): ...` runs the block on `path`, then restores the
    path that was in use."""
    before = set_path(path)
    try:
        yield
    finally:
        set_path(before)
