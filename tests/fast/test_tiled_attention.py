"""npbert/fast/tiled_attention.py computes what the reference attention (npbert/ops/attention.py)
computes: context and dq, dk, dv, for every mask kind, head masks, dropout (the same masks, drawn
per block) and blocks that do and do not divide the sequence.

Tolerances:
    float64: normwise relative, max |tiled - ref| / max |ref| <= 1e-12.  Both compute the same
        exact function with O(D + T) roundings of 2^-53 each (the tiled op's running max changes
        which exps are rounded, not how many); measured <= 2e-15.
    float32: entry by entry within float32_bounds (derived in its docstring: the first-order
        rounding error of each side's steps, added; a worst case: measured <= 1% of it), and
        normwise within 16 ulp as the other fast twins (measured <= 4 ulp); a planted 1e-3
        relative error in one entry breaks the bound (test_float32_bound_can_fail).

Every test runs twice (the `forward_path` fixture): as the op runs, where ordinary scores take
the forward without a running max (_forward_rows_unshifted), and with that path switched off,
so that the running max (_forward_rows) computes every block.  Which path a block takes is
tested below ("the two forward loops").
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npbert.fast.tiled_attention as tiled
import npbert.ops.attention as ref
from npbert.ops.dropout import DropoutKey, keep_mask

F64_REL = 1e-12                      # see the module docstring
REAL_CANNOT_OVERFLOW = tiled._cannot_overflow          # (the fixture below may replace it)
SETTINGS = settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
MIN64 = np.finfo(np.float64).min


@pytest.fixture(autouse=True, params=["as it runs", "running max only"])
def forward_path(request, monkeypatch):
    """Every test with the op as it is, and with _cannot_overflow always False (the forward's
    running max for every block)."""
    if request.param == "running max only":
        monkeypatch.setattr(tiled, "_cannot_overflow", lambda *args: False)
    return request.param


def rel(a, b):
    """max |a - b| / max |b| (NaN where both are NaN counts as equal)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    both_nan = np.isnan(a) & np.isnan(b)
    a, b = np.where(both_nan, 0, a), np.where(both_nan, 0, b)
    scale = np.abs(b).max() if b.size else 0.0
    diff = np.abs(a - b).max() if a.size else 0.0
    return diff / scale if scale else diff


def inputs(B, N, F, T, D, dtype=np.float64, seed=0):
    r = np.random.default_rng(seed)
    q, dcontext = (r.normal(size=(B, N, F, D)).astype(dtype) for _ in range(2))
    k, v = (r.normal(size=(B, N, T, D)).astype(dtype) for _ in range(2))
    return q, k, v, dcontext


def both(q, k, v, dcontext, mask=None, head_mask=None, p=0.0, rng=None, training=False, block=4, rng_again=None):
    """(context, dq, dk, dv) of the reference and of the tiled op (rng_again: the tiled op's
    generator when `rng` is one, drawn from the same seed)."""
    context_r, cache_r = ref.attention_forward(q, k, v, mask, head_mask, p, rng, training)
    grads_r = ref.attention_backward(dcontext, cache_r)
    context_t, cache_t = tiled.tiled_attention_forward(q, k, v, mask, head_mask, p,
                                                       rng if rng_again is None else rng_again, training, block=block)
    grads_t = tiled.tiled_attention_backward(dcontext, cache_t)
    return (context_r, *grads_r), (context_t, *grads_t)


def assert_equal64(r, t):
    for name, a, b in zip(("context", "dq", "dk", "dv"), t, r):
        assert rel(a, b) <= F64_REL, (name, rel(a, b))


def masks(kind, B, F, T, seed=1, dtype=np.float64):
    """Additive masks of each kind the model passes (finfo.min of dtype where masked)."""
    r = np.random.default_rng(seed)
    MIN64 = np.finfo(dtype).min                                             # (the name: float64's by default)
    if kind == "none":
        return None
    if kind == "padding":                                                  # (B, 1, 1, T), keeps >= 1 token
        lengths = r.integers(1, T + 1, size=B)
        return np.where(np.arange(T)[None, :] < lengths[:, None], 0.0, MIN64).astype(dtype)[:, None, None, :]
    if kind == "decoder":                                                  # (B, 1, F, T): causal and padding
        causal = np.tril(np.ones((F, T), bool), k=T - F)
        keep = causal[None] & (r.random((B, 1, T)) < 0.8)
        keep[..., 0] = True
        return np.where(keep, 0.0, MIN64).astype(dtype)[:, None]
    if kind == "all_masked_rows":                                          # (B, 1, F, T) with whole rows masked
        keep = r.random((B, F, T)) < 0.6
        keep[:, ::3] = False
        return np.where(keep, 0.0, MIN64).astype(dtype)[:, None]
    if kind == "minus_inf_holes":                                          # -inf, each row keeping a token
        keep = r.random((B, 1, F, T)) < 0.5
        keep[..., -1] = True
        return np.where(keep, 0.0, -np.inf).astype(dtype)
    if kind == "2-D":                                                      # (F, T): broadcast over B and N
        return r.normal(size=(F, T)).astype(dtype)
    raise ValueError(kind)


MASK_KINDS = ["none", "padding", "decoder", "all_masked_rows", "minus_inf_holes", "2-D"]


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("block", [1, 3, 4, 11, 64, (2, 5)])
def test_float64_every_mask_kind_and_block(kind, block):
    """T = 11: blocks 3 and 4 do not divide it, 11 is one block, 64 more than T."""
    q, k, v, dcontext = inputs(2, 3, 11, 11, 5)
    head_mask = np.array([1.0, 0.0, 0.5])
    r, t = both(q, k, v, dcontext, masks(kind, 2, 11, 11), head_mask, block=block)
    assert_equal64(r, t)


def test_all_masked_rows_are_uniform_as_in_the_reference():
    """A row with every key at finfo.min: the reference's softmax gives 1/T (x - max(x) = 0 there),
    and its backward a gradient through it; so does the tiled op (m and log l kept apart: m + log l
    would round to m and give exp(0) = 1)."""
    q, k, v, dcontext = inputs(1, 2, 5, 9, 4)
    mask = np.zeros((1, 1, 5, 9))
    mask[..., 2, :] = MIN64
    r, t = both(q, k, v, dcontext, mask, block=4)
    np.testing.assert_allclose(t[0][:, :, 2], v.mean(axis=2), rtol=1e-13)    # uniform over the keys
    assert np.abs(t[1][:, :, 2]).max() > 0                                 # the reference's gradient there
    assert_equal64(r, t)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
def test_rows_of_minus_inf_are_nan_as_in_the_reference():
    q, k, v, dcontext = inputs(1, 1, 3, 6, 2)
    mask = np.zeros((1, 1, 3, 6))
    mask[..., 1, :] = -np.inf
    r, t = both(q, k, v, dcontext, mask, block=4)
    for a, b in zip(r, t):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    assert np.isnan(t[0][0, 0, 1]).all() and not np.isnan(t[0][0, 0, 0]).any()
    assert_equal64(r, t)


@pytest.mark.parametrize("F,T", [(1, 1), (1, 7), (7, 1), (5, 12)])
def test_queries_and_keys_of_other_lengths(F, T):
    q, k, v, dcontext = inputs(2, 2, F, T, 3)
    r, t = both(q, k, v, dcontext, masks("padding", 2, F, T), block=4)
    assert_equal64(r, t)


@pytest.mark.parametrize("first_row", [0, 3])
@pytest.mark.parametrize("N,F,T", [(2, 5, 7), (3, 4, 6), (1, 1, 1)])      # N F T odd and even (half words)
def test_dropout_keyed_same_masks_as_the_reference(first_row, N, F, T):
    """The masks of a DropoutKey: every block the tiled op draws is the reference's mask there, bit
    for bit, and so the numbers are the reference's."""
    B, p = 2, 0.4
    key = DropoutKey(1234, "encoder.layer.0.attention.self.dropout", first_row)
    full = keep_mask(key, (B, N, F, T), p)                                 # (B, N, F, T) the reference's
    drop = tiled._Dropout.make(key, p, True, (B, N, F, T), np.dtype(np.float64))
    for b in range(B):
        for h0, h1 in ((0, N), (N - 1, N)):
            for f0, f1 in ((0, F), (F // 2, F), (0, 1)):
                np.testing.assert_array_equal(drop.keep(b, h0, h1, f0, f1), full[b, h0:h1, f0:f1])
    q, k, v, dcontext = inputs(B, N, F, T, 3)
    r, t = both(q, k, v, dcontext, masks("padding", B, F, T), np.linspace(1, 0.5, N), p, key, True, block=3)
    assert_equal64(r, t)


def test_dropout_same_masks_as_the_fast_op_drawing_in_pieces():
    """Against npbert/fast/attention.py (the op the model runs now), with a keyed mask large enough
    that the fast dropout draws it in pieces on threads (> 2^17 entries a batch row)."""
    import npbert.fast.attention as fast
    B, N, F, T, D = 2, 2, 260, 260, 4                                       # 135200 entries a row
    q, k, v, dcontext = inputs(B, N, F, T, D)
    key = DropoutKey(11, "encoder.layer.1.attention.self.dropout", 5)
    mask = masks("padding", B, F, T)
    context_f, cache_f = fast.attention_forward(q, k, v, mask, None, 0.1, key, True)
    fast_results = (context_f, *fast.attention_backward(dcontext, cache_f))
    context_t, cache_t = tiled.tiled_attention_forward(q, k, v, mask, None, 0.1, key, True, block=96)
    tiled_results = (context_t, *tiled.tiled_attention_backward(dcontext, cache_t))
    np.testing.assert_array_equal(cache_f["dropout"][0], keep_mask(key, (B, N, F, T), 0.1))
    assert_equal64(fast_results, tiled_results)


def test_dropout_generator_same_masks_and_same_state_after():
    """An np.random.Generator: the tiled op draws the reference's masks from a copy of its state
    and leaves the generator where the reference's draw leaves it (a 32-bit value buffered before
    stays buffered)."""
    g_r, g_t = np.random.default_rng(9), np.random.default_rng(9)
    g_r.integers(0, 2 ** 32, dtype=np.uint32)                              # buffers a half word ...
    g_t.integers(0, 2 ** 32, dtype=np.uint32)                              # ... on both
    q, k, v, dcontext = inputs(2, 3, 5, 7, 4)                              # N F T odd: a row splits a word
    r, t = both(q, k, v, dcontext, None, None, 0.3, g_r, True, block=2, rng_again=g_t)
    assert_equal64(r, t)
    assert g_r.bit_generator.state == g_t.bit_generator.state
    assert g_r.integers(0, 2 ** 32, dtype=np.uint32) == g_t.integers(0, 2 ** 32, dtype=np.uint32)


def test_dropout_other_bit_generator_and_p_one():
    """MT19937 cannot jump: the whole mask is drawn once (the same draws); p = 1 drops everything,
    as the reference, with zero gradients."""
    q, k, v, dcontext = inputs(1, 2, 4, 5, 3)
    r, t = both(q, k, v, dcontext, None, None, 0.5, np.random.Generator(np.random.MT19937(3)), True,
                rng_again=np.random.Generator(np.random.MT19937(3)))
    assert_equal64(r, t)
    r, t = both(q, k, v, dcontext, None, None, 1.0, None, True)
    for a in t:
        assert not a.any()
    assert_equal64(r, t)


def test_thread_count_changes_nothing():
    from npbert.fast.parallel import get_num_threads, set_num_threads
    q, k, v, dcontext = inputs(3, 4, 9, 9, 4)
    key = DropoutKey(5, "s", 0)
    before = get_num_threads()
    results = []
    try:
        for n in (1, 2, 5):
            set_num_threads(n)
            context, cache = tiled.tiled_attention_forward(q, k, v, masks("padding", 3, 9, 9), None, 0.2, key, True,
                                                           block=4)
            results.append((context, *tiled.tiled_attention_backward(dcontext, cache)))
    finally:
        set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_out_buffers_views_included():
    """`out=` writes the context into a caller's array (here a transposed view, as a (B, F, N, D)
    buffer would give) and the gradients into (dq, dk, dv): the same numbers as without."""
    q, k, v, dcontext = inputs(2, 3, 7, 7, 4)
    mask = masks("padding", 2, 7, 7)
    r, t = both(q, k, v, dcontext, mask, block=3)
    buffer = np.full((2, 7, 3, 4), np.nan)                                 # (B, F, N, D)
    context, cache = tiled.tiled_attention_forward(q, k, v, mask, block=3, out=buffer.transpose(0, 2, 1, 3))
    grads = tuple(np.full_like(a, np.nan) for a in (q, k, v))
    returned = tiled.tiled_attention_backward(dcontext, cache, out=grads)
    np.testing.assert_array_equal(buffer.transpose(0, 2, 1, 3), t[0])
    for a, b, c in zip(grads, returned, t[1:]):
        assert a is b
        np.testing.assert_array_equal(a, c)


def test_bad_input_says_what_is_wrong():
    q, k, v, _ = inputs(1, 2, 3, 3, 2)
    with pytest.raises(ValueError, match="block must be a positive int"):
        tiled.tiled_attention_forward(q, k, v, block=0)
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled.tiled_attention_forward(q, k, v, np.zeros((1, 1, 1, 4)))
    with pytest.raises(ValueError, match="needs a generator"):
        tiled.tiled_attention_forward(q, k, v, dropout_p=0.1, training=True)


@SETTINGS
@given(data=st.data())
def test_hypothesis_small_shapes(data):
    B, N, F, T, D = (data.draw(st.integers(1, n)) for n in (3, 3, 9, 9, 4))
    q, k, v, dcontext = inputs(B, N, F, T, D, seed=data.draw(st.integers(0, 2 ** 16)))
    kind = data.draw(st.sampled_from(MASK_KINDS))
    head_mask = data.draw(st.none() | st.just(np.random.default_rng(B).random(N)))
    p = data.draw(st.sampled_from([0.0, 0.1, 0.5]))
    key = DropoutKey(data.draw(st.integers(0, 2 ** 32)), "site", data.draw(st.integers(0, 5)))
    block = data.draw(st.integers(1, 10) | st.tuples(st.integers(1, 10), st.integers(1, 10)))
    r, t = both(q, k, v, dcontext, masks(kind, B, F, T), head_mask, p, key, True, block=block)
    assert_equal64(r, t)


# ---- float32 ----------------------------------------------------------------------------------------

def float32_bounds(q, k, v, dcontext, mask, after, keep, scale, n_key_blocks):
    """Entry-by-entry bounds on |tiled - reference| in float32 for (context, dq, dk, dv), to first
    order in u = 2^-24, from the steps each side takes (both sides' errors added: 2x one side's,
    taking the larger of the two where they differ).  gamma_n = n u / (1 - n u), the bound of an
    n-term sum or dot product; A = P keep after, the probabilities as used; every quantity on the
    right computed in float64 from the float32 inputs.

    scores   dS_ft = gamma_D scale (|q| |k|^T)_ft + 2u |S_ft|     (the dot product, * scale, + mask)
    softmax  each exp's argument S - m is off by dS_ft + max_t dS_ft (m is one of the S) + u |S - m|
             (the subtraction), exp adds 2u, the tiled op's rescales exp(m_old - m_new) telescope
             to exp(m_j - m) with u |S - m| + 2u per key block: the relative error of the numerator
             e_ft <= 2 max_t dS_ft + 2u |S_ft - m_f| + 2u (n_key_blocks + 1);  the sum l gets
             max_t e_ft + gamma_T, the division u, dropout and head mask 2u:
             |dA_ft| <= eA_f A_ft, eA_f = 2 max_t e_ft + gamma_T + 3u
    context  |dO| <= eA (A |V|) + gamma_T (A |V|)
    dv       |ddV| <= (eA A)^T |dO| + gamma_F A^T |dO|
    dP = (dO V^T) keep after:  |ddP| <= gamma_D (|dO| |V|^T) keep after + 2u |dP|
    delta = rowsum(dO O) (tiled) = rowsum(dP P) (reference):
             |d delta| <= gamma_D sum|dO||O| + sum |dO| |dO_err| + gamma_T sum |dP| P + sum |ddP| P + sum |dP| eA P
    dS = P (dP - delta) scale:  |ddS| <= scale (eA P |dP - delta| + P (|ddP| + |d delta|) + 3u P |dP - delta|)
    dq = dS K, dk = dS^T Q:  |ddq| <= |ddS| |K| + gamma_T |dS| |K|,  |ddk| <= |ddS|^T |Q| + gamma_F |dS|^T |Q|
    """
    q, k, v, do = (np.asarray(a, np.float64) for a in (q, k, v, dcontext))
    u = 2.0 ** -24
    D, F, T = q.shape[-1], q.shape[2], k.shape[2]

    def gamma(n):
        return n * u / (1 - n * u)
    S = q @ k.transpose(0, 1, 3, 2) * scale + (0 if mask is None else mask)
    dS = gamma(D) * scale * (np.abs(q) @ np.abs(k).transpose(0, 1, 3, 2)) + 2 * u * np.abs(S)
    m = S.max(axis=-1, keepdims=True)
    P = np.exp(S - m)
    P /= P.sum(axis=-1, keepdims=True)
    live = P > 0                                                           # masked keys: exp is 0 on both sides
    dS = np.where(live, dS, 0)
    spread = np.where(live, np.abs(S - m), 0)
    e = 2 * dS.max(axis=-1, keepdims=True) + 2 * u * spread + 2 * u * (n_key_blocks + 1)
    eA = 2 * e.max(axis=-1, keepdims=True) + gamma(T) + 3 * u                # (B, N, F, 1)
    Z = after[None, :, None, None] * (1.0 if keep is None else keep)
    A = P * Z
    AV = A @ np.abs(v)
    d_context = (eA + gamma(T)) * AV
    O = A @ v
    d_dv = (eA * A).transpose(0, 1, 3, 2) @ np.abs(do) + gamma(F) * A.transpose(0, 1, 3, 2) @ np.abs(do)
    dP = (do @ v.transpose(0, 1, 3, 2)) * Z
    d_dP = gamma(D) * (np.abs(do) @ np.abs(v).transpose(0, 1, 3, 2)) * np.abs(Z) + 2 * u * np.abs(dP)
    d_delta = (gamma(D) * np.abs(do * O).sum(-1, keepdims=True) + (np.abs(do) * d_context).sum(-1, keepdims=True)
               + gamma(T) * (np.abs(dP) * P).sum(-1, keepdims=True) + (d_dP * P).sum(-1, keepdims=True)
               + (np.abs(dP) * eA * P).sum(-1, keepdims=True))
    delta = (do * O).sum(-1, keepdims=True)
    g = P * (dP - delta) * scale
    d_g = scale * (eA * P * np.abs(dP - delta) + P * (d_dP + d_delta) + 3 * u * P * np.abs(dP - delta))
    d_dq = d_g @ np.abs(k) + gamma(T) * np.abs(g) @ np.abs(k)
    d_dk = d_g.transpose(0, 1, 3, 2) @ np.abs(q) + gamma(F) * np.abs(g).transpose(0, 1, 3, 2) @ np.abs(q)
    return tuple(2 * b for b in (d_context, d_dq, d_dk, d_dv))


def float32_case(kind, p, block):
    B, N, F, T, D = 2, 3, 37, 37, 16
    q, k, v, dcontext = inputs(B, N, F, T, D, np.float32, seed=4)
    mask = masks(kind, B, F, T, dtype=np.float32)
    head_mask = np.array([1.0, 0.0, 0.7], np.float32)
    key = DropoutKey(77, "site", 0)
    r, t = both(q, k, v, dcontext, mask, head_mask, p, key, p > 0, block=block)
    keep = keep_mask(key, (B, N, F, T), p) if p > 0 else None
    after = head_mask / (1 - p)
    scale = np.float32(D ** -0.5)
    n_key_blocks = -(-T // (block if isinstance(block, int) else block[1]))
    bounds = float32_bounds(q, k, v, dcontext, None if mask is None else mask.astype(np.float64), after, keep,
                            float(scale), n_key_blocks)
    return r, t, bounds


@pytest.mark.parametrize("kind", ["none", "padding", "decoder"])
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("block", [8, (5, 16)])
def test_float32_within_the_derived_bound(kind, p, block):
    r, t, bounds = float32_case(kind, p, block)
    for name, a, b, bound in zip(("context", "dq", "dk", "dv"), t, r, bounds):
        assert a.dtype == np.float32
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        assert np.all(err <= bound), (name, (err - bound).max())
        # and normwise within the 16 ulp the other float32 fast twins keep (measured <= 4 ulp)
        assert err.max() <= 16 * np.finfo(np.float32).eps * np.abs(b).max(), name


def test_float32_bound_can_fail():
    """A 1e-3 relative error planted in one entry of each result breaks its bound."""
    r, t, bounds = float32_case("padding", 0.3, 8)
    for a, b, bound in zip(t, r, bounds):
        planted = a.astype(np.float64).copy()
        i = np.unravel_index(np.argmax(np.abs(b)), b.shape)
        planted[i] *= 1 + 1e-3
        assert not np.all(np.abs(planted - b) <= bound)


# ---- the two forward loops ---------------------------------------------------------------------------

def count_loops(monkeypatch):
    """Spies on the forward's two loops: {"unshifted": blocks it finished, "running max": blocks}."""
    calls = {"unshifted": 0, "running max": 0}
    unshifted, running = tiled._forward_rows_unshifted, tiled._forward_rows

    def spy_unshifted(*args):
        done = unshifted(*args)
        calls["unshifted"] += bool(done)
        return done

    def spy_running(*args):
        calls["running max"] += 1
        return running(*args)
    monkeypatch.setattr(tiled, "_forward_rows_unshifted", spy_unshifted)
    monkeypatch.setattr(tiled, "_forward_rows", spy_running)
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ordinary_scores_take_the_loop_without_a_max(monkeypatch, forward_path, dtype):
    """Scores of normal(0, 1) q, k: the bound holds, no row is small, every block is unshifted
    (and row_max is 0); in float32 with q scaled by 20 (scores up to about 20 * 20 * |q| |k| /
    sqrt(D), past the float32 limit log(max) - log(T) - 1 = 85.2 for T = 12) the running max
    takes them, with the reference's numbers and no overflow."""
    calls = count_loops(monkeypatch)
    blocks = len(tiled._tasks(2, 3)) * 3                                   # tasks x 3 query blocks of 4
    q, k, v, dcontext = inputs(2, 3, 12, 12, 8, dtype)
    _, cache = tiled.tiled_attention_forward(q, k, v, block=4)
    if forward_path == "as it runs":
        assert calls == {"unshifted": blocks, "running max": 0}
        assert not cache["row_max"].any()
    else:
        assert calls == {"unshifted": 0, "running max": blocks}
    if dtype == np.float32:
        calls.update({"unshifted": 0, "running max": 0})
        q = q * 20
        r, t = both(q, k, v, dcontext, block=4)
        assert calls == {"unshifted": 0, "running max": blocks}
        assert all(np.isfinite(x).all() for x in t)
        assert rel(t[0], r[0]) < 1e-5


def test_rows_far_below_zero_go_back_to_the_running_max(monkeypatch, forward_path):
    """A row whose scores are all near -2000 (a -2000 additive mask on every key of query row 2):
    exp underflows to 0 there, the row sum is below 2^-20, and that block of query rows is
    computed again with the running max, which gives the reference's numbers (not NaN)."""
    calls = count_loops(monkeypatch)
    q, k, v, dcontext = inputs(1, 2, 8, 8, 4)
    mask = np.zeros((1, 1, 8, 8))
    mask[..., 2, :] = -2000.0
    r, t = both(q, k, v, dcontext, mask, block=4)
    assert all(np.isfinite(x).all() for x in t)
    assert_equal64(r, t)
    if forward_path == "as it runs":
        tasks = len(tiled._tasks(1, 2))                                     # 2 heads: 1 or 2 tasks
        assert calls == {"unshifted": tasks, "running max": tasks}         # rows 0-3 again, rows 4-7 not


def test_the_bound_check_is_needed(monkeypatch):
    """With _cannot_overflow always True, float32 scores past the limit overflow (inf / inf = NaN
    in the context): the check is what keeps the unshifted loop to scores it can take."""
    monkeypatch.setattr(tiled, "_cannot_overflow", lambda *args: True)
    q, k, v, dcontext = inputs(1, 1, 4, 4, 8, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        context, _ = tiled.tiled_attention_forward(q * 100, k * 10, v, block=4)
    assert np.isnan(context).any()


def test_the_bound_is_above_every_score():
    """_cannot_overflow never says yes while some score is above the limit (its bound |q_f|
    max_t |k_t| + max mask is above every score), for random and aligned q, k (aligned: the
    bound is reached), with masks; and says yes once the limit is above the bound."""
    real = REAL_CANNOT_OVERFLOW
    r = np.random.default_rng(5)
    for trial in range(20):
        qi, k = r.normal(size=(2, 6, 4)) * r.uniform(0.1, 30), r.normal(size=(2, 9, 4))
        if trial % 2:
            k[:, 3] = qi[:, 0] * 2                                         # q_0 . k_3 = |q_0| |k_3|
        mask = r.normal(size=(1, 6, 9)) * 10
        scores = qi @ k.transpose(0, 2, 1) + mask                          # (2, 6, 9)
        key_norm = np.sqrt((k * k).sum(-1)).max(axis=1)
        top = mask.max(axis=-1)                                            # what the forward passes
        assert not real(qi, key_norm, top, scores.max() * (1 - 1e-9))
        assert real(qi, key_norm, top, 1e6)
        assert not real(qi * np.nan, key_norm, top, 1e6)                   # NaN: the running max


# ---- key blocks masked away --------------------------------------------------------------------------

def visited(monkeypatch):
    """Spies on _key_blocks: the list of key blocks each call returned (forward and backward)."""
    seen = []
    key_blocks = tiled._key_blocks

    def spy(*args):
        seen.append(key_blocks(*args))
        return seen[-1]
    monkeypatch.setattr(tiled, "_key_blocks", spy)
    return seen


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masked_key_blocks_are_skipped_with_the_same_numbers(monkeypatch, dtype):
    """Padding (keys 5.. of batch row 1 masked with finfo.min) and causal masks: the key blocks
    wholly masked are not visited, forward or backward, and the results equal the reference's
    (float64 to 1e-12; float32 within 16 ulp normwise, as test_float32_within_the_derived_bound)."""
    seen = visited(monkeypatch)
    low = np.finfo(dtype).min
    q, k, v, dcontext = inputs(2, 2, 12, 12, 4, dtype)
    padding = np.zeros((2, 1, 1, 12), dtype)
    padding[1, ..., 5:] = low
    causal = np.where(np.tril(np.ones((12, 12), bool)), 0, low).astype(dtype)[None, None]
    for mask in (padding, causal):
        seen.clear()
        r, t = both(q, k, v, dcontext, mask, block=4)
        for name, a, b in zip(("context", "dq", "dk", "dv"), t, r):
            assert rel(a, b) <= (F64_REL if dtype == np.float64 else 16 * np.finfo(np.float32).eps), name
        visits = sum(len(cols) for cols in seen)                           # forward and backward
        every = 2 * len(seen) * 3                                          # 3 key blocks of 4
        assert visits < every
    assert [len(c) for c in seen[:len(seen) // 2]] == [1, 2, 3] * (len(seen) // 6)   # causal: blocks <= the row's


def test_masked_blocks_are_visited_where_skipping_would_change_a_number(monkeypatch):
    """No skip where the reference's numbers come from the masked keys: a row whose keys are all
    masked (uniform over all of them), NaN in v at a masked key (0 * NaN = NaN in the
    reference's context) or in dcontext (the reference's dk at masked keys is NaN)."""
    seen = visited(monkeypatch)
    q, k, v, dcontext = inputs(1, 1, 8, 8, 4)
    mask = np.zeros((1, 1, 8, 8))
    mask[..., 4:] = MIN64                                                  # keys 4..7 masked for every row
    both(q, k, v, dcontext, mask, block=4)
    assert all(len(cols) == 1 for cols in seen)
    cases = []
    all_masked = mask.copy()
    all_masked[..., 1, :] = MIN64                                          # row 1: every key
    cases.append((v, dcontext, all_masked))
    v_nan = v.copy()
    v_nan[..., 6, 0] = np.nan
    cases.append((v_nan, dcontext, mask))
    for v_case, d_case, m_case in cases:
        seen.clear()
        with np.errstate(invalid="ignore"):
            r, t = both(q, k, v_case, d_case, m_case, block=4)
        assert len(seen[0]) == 2                                           # query rows 0..3: both key blocks
        for a, b in zip(t, r):
            np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        assert_equal64(r, t)
    seen.clear()
    d_nan = dcontext.copy()
    d_nan[..., 0, 0] = np.nan
    with np.errstate(invalid="ignore"):
        r, t = both(q, k, v, d_nan, mask, block=4)
    assert [len(c) for c in seen] == [1, 1, 2, 1]                          # forward 2 blocks, backward 2
    for a, b in zip(t, r):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))


def test_a_skipped_block_that_is_not_masked_is_caught(monkeypatch):
    """_key_blocks dropping the last key block of every call, masked or not: caught."""
    key_blocks = tiled._key_blocks
    monkeypatch.setattr(tiled, "_key_blocks", lambda *args: key_blocks(*args)[:-1] or key_blocks(*args))
    q, k, v, dcontext = inputs(1, 2, 8, 8, 4)
    with pytest.raises(AssertionError):
        assert_equal64(*both(q, k, v, dcontext, None, block=4))


# ---- planted errors ---------------------------------------------------------------------------------

def test_a_forgotten_rescale_is_caught(monkeypatch):
    """With the rescale exp(m_old - m_new) replaced by 1 (the sums so far kept at the old max),
    the comparison fails as soon as there is more than one key block (the running max's loop)."""
    monkeypatch.setattr(tiled, "_cannot_overflow", lambda *args: False)
    q, k, v, dcontext = inputs(2, 2, 9, 9, 4)
    assert_equal64(*both(q, k, v, dcontext, block=4))
    monkeypatch.setattr(tiled, "_rescale", lambda m, m_new: np.where(np.isneginf(m), 0.0, 1.0))
    r, t = both(q, k, v, dcontext, block=4)
    assert rel(t[0], r[0]) > 1e-3
    with pytest.raises(AssertionError):
        assert_equal64(r, t)
    assert_equal64(*both(q, k, v, dcontext, block=9))                      # one key block: no rescale needed


def test_a_wrong_dropout_block_is_caught(monkeypatch):
    """Masks drawn for the wrong query rows (off by one row) are caught."""
    q, k, v, dcontext = inputs(2, 2, 9, 9, 4)
    key = DropoutKey(3, "site", 0)
    assert_equal64(*both(q, k, v, dcontext, None, None, 0.3, key, True, block=4))
    keep = tiled._Dropout.keep
    monkeypatch.setattr(tiled._Dropout, "keep", lambda self, b, h0, h1, f0, f1:
                        np.roll(keep(self, b, h0, h1, f0, f1), 1, axis=1))
    with pytest.raises(AssertionError):
        assert_equal64(*both(q, k, v, dcontext, None, None, 0.3, key, True, block=4))


def test_a_wrong_delta_is_caught(monkeypatch):
    """The backward's delta = rowsum(dO * O) taken twice over (a wrong derivation) is caught: dq
    and dk differ; context and dv, which do not use it, do not."""
    q, k, v, dcontext = inputs(1, 2, 6, 6, 3)
    row_dot = tiled._row_dot
    monkeypatch.setattr(tiled, "_row_dot", lambda do, o: 2 * row_dot(do, o))
    r, t = both(q, k, v, dcontext, None, np.array([0.5, 1.0]), block=4)
    assert rel(t[0], r[0]) <= F64_REL and rel(t[3], r[3]) <= F64_REL
    assert rel(t[1], r[1]) > 1e-3 and rel(t[2], r[2]) > 1e-3


# ---- the docs' snippet --------------------------------------------------------------------------------

def test_the_docs_snippet_runs_and_prints_equal_numbers(capsys):
    """docs/long_sequences.md's snippet (its first ```python block) runs and shows the two paths agree."""
    import os
    page = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "long_sequences.md")
    code = re.search(r"```python\n(.*?)```", open(page, encoding="utf-8").read(), re.S).group(1)
    exec(compile(code, "long_sequences.md", "exec"), {"__name__": "__docs__"})
    out = capsys.readouterr().out
    diffs = [float(x) for x in re.findall(r"max \|tiled - reference\| = ([0-9.e+-]+)", out)]
    assert len(diffs) == 4 and max(diffs) < 1e-12
