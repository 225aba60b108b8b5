"""docs/testing_your_bert.md's properties catch deliberately wrong implementations, and
hypothesis shrinks each failure to a small example."""
import contextlib
import os
import re

import numpy as np
import pytest
from hypothesis import Phase, settings

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


# ---- section 2: a whole layer of your own --------------------------------------------------------
# Each wrong layer is the page's own code with one edit (the old text must be on the page, so
# the page cannot drift away from what is tested).
FORWARD_EDITS = {
    "no_max_shift": [("p = np.exp(s - s.max(-1, keepdims=True))", "p = np.exp(s)")],
    "unbiased_variance": [("x.var(-1, keepdims=True)", "x.var(-1, ddof=1, keepdims=True)")],
    "eps_outside_sqrt": [("np.sqrt(x.var(-1, keepdims=True) + eps)", "(np.sqrt(x.var(-1, keepdims=True)) + eps)")],
    "mask_after_softmax": [("/ np.sqrt(D) + mask", "/ np.sqrt(D)"),
                           ("p = p / p.sum(-1, keepdims=True)", "p = p / p.sum(-1, keepdims=True) + mask")],
    "no_scale": [("/ np.sqrt(D) + mask", "+ mask"), (" / np.sqrt(q.shape[-1])", "")],
    "tanh_gelu": [("return 0.5 * u * (1 + erf(u / np.sqrt(2)))",
                   "return 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))")],
    "interleaved_heads": [("t.reshape(B, T, N, D).transpose(0, 2, 1, 3)", "t.reshape(B, T, D, N).transpose(0, 3, 1, 2)"),
                          ("t.transpose(0, 2, 1, 3).reshape(B, T, H)", "t.transpose(0, 2, 3, 1).reshape(B, T, H)")],
}
_TANH_DERIVATIVE = ("dy * (0.5 * (1 + np.tanh(c * (u + 0.044715 * u ** 3))) + 0.5 * u * (1 - np.tanh(c * (u + 0.044715 "
                    "* u ** 3)) ** 2) * c * (1 + 3 * 0.044715 * u ** 2))")
BACKWARD_EDITS = {
    "no_softmax_sum_term": [("p * (dp - (dp * p).sum(-1, keepdims=True))", "p * dp")],
    "no_residual_grad": [("dx = dsum ", "dx = 0.0 ")],
    "layer_norm_no_projection": [(" - xhat * (dxhat * xhat).mean(-1, keepdims=True)", "")],
    "no_scale_backward": [(" / np.sqrt(q.shape[-1])", "")],
    "tanh_gelu_backward": [("return dy * (0.5 * (1 + erf(u / np.sqrt(2))) + u * np.exp(-u * u / 2) / np.sqrt(2 * np.pi))",
                            f"c = np.sqrt(2 / np.pi)\n    return {_TANH_DERIVATIVE}")],
    "transposed_dW": [("    return dx, g", '    g["attention.self.query.weight"] = g["attention.self.query.weight"].T\n'
                                          "    return dx, g")],
}


def _layer_page():
    blocks = re.findall(r"^```python\n(.*?)^```", open(PAGE, encoding="utf-8").read(), re.S | re.M)
    (first,) = [b for b in blocks if "def test_layer_norm(" in b]
    (harness,) = [b for b in blocks if "def test_bert_layer(" in b]
    (layer,) = [b for b in blocks if "def my_layer(" in b]
    (fd,) = [b for b in blocks if "check_forward_backward(lambda x, **w: my_layer" in b]
    return first, harness, layer.replace("test_bert_layer(my_layer, my_layer_backward)", ""), fd


def _edited(code, edits):
    for old, new in edits:
        assert old in code, f"the page no longer has {old!r}"
        code = code.replace(old, new)
    return code


def _layer_namespace(edits=()):
    first, harness, layer, _ = _layer_page()
    ns = {}
    for code in (first, harness, _edited(layer, edits)):
        exec(compile(code, PAGE, "exec"), ns)
    return ns


@contextlib.contextmanager
def no_shrinking():
    """Hypothesis without its shrink phase for the block (the page's settings leave `phases` to
    the default profile): whether the property fails is what is tested here, not how small."""
    saved = "npbert-page-saved"
    settings.register_profile(saved, parent=settings.default)
    settings.register_profile("npbert-page-no-shrink", parent=settings.default,
                              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    settings.load_profile("npbert-page-no-shrink")
    try:
        yield
    finally:
        settings.load_profile(saved)


LAYER_BUGS = {**FORWARD_EDITS, **{b: BACKWARD_EDITS[b] for b in ("no_softmax_sum_term", "no_residual_grad")}}


@pytest.mark.parametrize("bug", sorted(LAYER_BUGS))
def test_the_layer_property_catches_each_listed_bug(bug):
    """The nine wrong layers the page lists under section 2, each one edit of its correct layer."""
    ns = _layer_namespace(LAYER_BUGS[bug])
    with no_shrinking(), pytest.raises(AssertionError):
        ns["test_bert_layer"](ns["my_layer"], ns["my_layer_backward"])
    assert ns["failures"]


@pytest.mark.parametrize("bug", sorted(BACKWARD_EDITS))
def test_finite_differences_catch_each_listed_wrong_backward(bug):
    """The page's last block (check_forward_backward on its own layer) with each wrong backward
    it lists: some Comparison is not ok.  (The bench runs the same wrong backwards, written in
    tests/oracle/outside_bert.py, on thousands of drawn layers.)"""
    _, _, _, fd = _layer_page()
    ns = _layer_namespace(BACKWARD_EDITS[bug])
    with pytest.raises(AssertionError):
        exec(compile(fd, PAGE, "exec"), ns)
    assert not all(c.ok for c in ns["checks"].values())


def test_the_listed_wrong_backwards_are_the_benchs():
    import outside_bert
    assert sorted(BACKWARD_EDITS) == sorted(outside_bert.BACKWARD_BUGS)
