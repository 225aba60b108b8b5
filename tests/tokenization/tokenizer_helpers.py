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


def call_options(offsets=False):
    """A hypothesis strategy: any mix of `__call__` keyword arguments (with `offsets`, also
    return_offsets_mapping)."""
    from hypothesis import strategies as st

    optional = {
        "add_special_tokens": st.booleans(),
        "padding": st.sampled_from([False, True, "longest", "max_length", "do_not_pad"]),
        "truncation": st.sampled_from([None, False, True, "longest_first", "only_first", "only_second"]),
        "max_length": st.integers(0, 24),
        "stride": st.integers(0, 4),
        "pad_to_multiple_of": st.sampled_from([None, 2, 8]),
        "padding_side": st.sampled_from(["left", "right"]),
        "return_tensors": st.sampled_from([None, "np"]),
        "return_token_type_ids": st.booleans(),
        "return_attention_mask": st.booleans(),
        "return_overflowing_tokens": st.booleans(),
        "return_special_tokens_mask": st.booleans(),
        "return_length": st.booleans(),
    }
    if offsets:
        optional["return_offsets_mapping"] = st.booleans()
    return st.fixed_dictionaries({}, optional=optional)
