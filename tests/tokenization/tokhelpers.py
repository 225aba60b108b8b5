"""Small helpers shared by the tokenizer tests."""
import os

import numpy as np


def write_vocab(directory, tokens):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    return path


def as_plain(encoding):
    """A BatchEncoding (ours or transformers') -> plain dict of lists / arrays,
    without the keys only npbert returns."""
    return {k: v for k, v in dict(encoding).items() if k != "offset_mapping"}


def assert_encodings_equal(ours, theirs):
    """Exact equality of every key and value; arrays also in dtype and shape."""
    ours, theirs = as_plain(ours), as_plain(theirs)
    assert list(ours) == list(theirs) or set(ours) == set(theirs), (list(ours), list(theirs))
    for key in theirs:
        a, b = ours[key], theirs[key]
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray), key
            assert a.dtype == b.dtype and a.shape == b.shape, (key, a.dtype, b.dtype, a.shape, b.shape)
            if b.dtype == object:
                assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b)), key
            else:
                assert np.array_equal(a, b), key
        else:
            assert a == b, key
