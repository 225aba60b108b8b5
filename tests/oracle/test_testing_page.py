"""docs/testing_your_bert.md's properties catch deliberately wrong implementations, and
hypothesis shrinks each failure to a small example."""
import os
import re

import numpy as np
import pytest

PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                    "testing_your_bert.md")


@pytest.fixture(scope="module")
def page():
    ns = {}
    blocks = re.findall(r"^```python\n(.*?)^```", open(PAGE, encoding="utf-8").read(), re.S | re.M)

    def block(defining):
        (found,) = [b for b in blocks if f"def {defining}(" in b]
        return found
    exec(compile(block("test_layer_norm"), PAGE, "exec"), ns)          # the property tests
    exec(compile(block("my_layer_norm").replace("test_layer_norm(my_layer_norm, my_layer_norm_backward)", ""),
                 PAGE, "exec"), ns)
    exec(compile(block("test_attention_backward").split("test_attention_backward(my_attention_backward)")[0],
                 PAGE, "exec"), ns)
    exec(compile(block("test_basic_tokenizer"), PAGE, "exec"), ns)     # the tokenizer property (and its correct run)
    return ns


def failing_example(ns, run):
    ns["failures"].clear()
    with pytest.raises(AssertionError):
        run()
    assert ns["failures"], "the property failed without recording its input"
    return ns["failures"][-1]                             # hypothesis replays the shrunk example last


def test_unbiased_variance_layer_norm_is_caught_and_shrunk(page):
    def wrong(x, gamma, beta, eps):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps) * gamma + beta

    x = failing_example(page, lambda: page["test_layer_norm"](wrong, page["my_layer_norm_backward"]))
    assert x.shape[0] == 1 and x.shape[1] <= 3            # shrunk to one short row


def _softmax_attention(q, k, v, keep, shift=True, use_mask=True):
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if use_mask:
        s = np.where(keep[:, None, None, :] == 1, s, -1e30)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True)) if shift else np.exp(s)
        return (e / e.sum(-1, keepdims=True)) @ v


def test_attention_without_max_shift_is_caught(page):
    keep = failing_example(page, lambda: page["test_attention"](
        lambda q, k, v, m: _softmax_attention(q, k, v, m, shift=False)))
    assert keep.shape[0] == 1                              # a batch of one suffices


def test_attention_forgetting_the_mask_is_caught_and_shrunk(page):
    keep = failing_example(page, lambda: page["test_attention"](
        lambda q, k, v, m: _softmax_attention(q, k, v, m, use_mask=False)))
    assert keep.shape == (1, 2) and keep.sum() == 1       # one kept token, one masked


def test_attention_backward_without_the_softmax_sum_term_is_caught_and_shrunk(page):
    def wrong(dout, q, k, v, keep):
        scale = 1.0 / np.sqrt(q.shape[-1])
        s = np.where(keep[:, None, None, :] == 1, q @ k.swapaxes(-1, -2) * scale, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ds = p * (dout @ v.swapaxes(-1, -2)) * scale                     # the "- sum(dp * p)" is missing
        return ds @ k, ds.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ dout

    shape, keep = failing_example(page, lambda: page["test_attention_backward"](wrong))
    # with one key p = 1 and the true ds is 0, the wrong one dp * scale: the smallest case fails
    assert shape == (1, 1, 1, 1) and keep.tolist() == [[1]], (shape, keep)


def test_tokenizer_without_accent_stripping_is_caught_and_shrunk(page):
    from npbert.tokenization import BasicTokenizer
    wrong = BasicTokenizer(do_lower_case=True, strip_accents=False).tokenize
    text = failing_example(page, lambda: page["test_basic_tokenizer"](wrong))
    # shrunk to one of texts()' accented pieces on its own ('e\u0301', 'Héllo', 'naïve', 'İstanbul'):
    # the pieces are atoms of the strategy, so one of them, alone, is as small as it gets
    assert len(text.split()) <= 1 and len(text) <= 8, text
