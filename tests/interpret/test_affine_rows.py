"""AffineRows (npbert/interpret/affine_rows.py): rows r = s B + b of base[b] + alphas[s] delta[b].

materialize must give the very numbers integrated gradients' points had (x' + alpha (x - x'),
alpha rounded to the dtype once: bit-equal); linear must equal materialize() W^T + c up to the
round-off of two float64 GEMMs added (1e-12 of the largest entry: a wrong alpha, example or bias
is 1e-2 or more); sum_by_example must be the explicit loop over rows, for any run of rows."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npbert.interpret.affine_rows import AffineRows


def make(B, S, dtype, seed=0, T=3, H=4):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(B, T, H)).astype(dtype)
    delta = rng.normal(size=(B, T, H)).astype(dtype)
    return base, delta, rng.random(S)


def rows_by_hand(base, delta, alphas, dtype):
    B = base.shape[0]
    return np.stack([base[r % B] + dtype(alphas[r // B]) * delta[r % B] for r in range(B * len(alphas))])


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 4), S=st.integers(1, 6), cut=st.tuples(st.floats(0, 1), st.floats(0, 1)),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_rows_sums_and_linear_of_any_run(B, S, cut, dtype):
    base, delta, alphas = make(B, S, dtype)
    R = B * S
    a, b = sorted(int(c * R) for c in cut)
    whole = AffineRows(base, delta, alphas)
    part = whole.rows(a, b)
    expected = rows_by_hand(base, delta, alphas, dtype)                              # (R, T, H)
    np.testing.assert_array_equal(whole.materialize(), expected)
    np.testing.assert_array_equal(part.materialize(), expected[a:b])
    assert part.shape == expected[a:b].shape and len(part) == b - a

    g = np.random.default_rng(1).normal(size=(b - a, 3, 5)).astype(dtype)
    sums = np.zeros((B, 3, 5), dtype)
    for i in range(b - a):
        sums[(a + i) % B] += g[i]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert np.abs(part.sum_by_example(g) - sums).max() <= tol * max(np.abs(sums).max(), 1)

    if dtype == np.float64:
        w, c = np.random.default_rng(2).normal(size=(6, 4)), np.random.default_rng(3).normal(size=6)
        direct = expected[a:b] @ w.T + c                                            # (b - a, T, 6)
        got = part.linear(w, c)
        assert got.shape == direct.shape
        if direct.size:
            assert np.abs(got - direct).max() <= 1e-12 * np.abs(direct).max()
            assert np.abs(part.linear(w) - expected[a:b] @ w.T).max() <= 1e-12 * np.abs(direct).max()


def test_a_wrong_example_or_alpha_is_seen():
    """The checks above can fail: rows put on the wrong example, or the wrong step, differ."""
    base, delta, alphas = make(3, 4, np.float64)
    expected = rows_by_hand(base, delta, alphas, np.float64)
    shifted = AffineRows(np.roll(base, 1, axis=0), np.roll(delta, 1, axis=0), alphas).materialize()
    assert np.abs(shifted - expected).max() > 1e-2
    reversed_steps = AffineRows(base, delta, alphas[::-1]).materialize()
    assert np.abs(reversed_steps - expected).max() > 1e-2


def test_bad_arguments_say_what_is_wrong():
    base, delta, alphas = make(2, 3, np.float64)
    with pytest.raises(ValueError, match="one shape"):
        AffineRows(base, delta[:, :2], alphas)
    with pytest.raises(ValueError, match="one shape"):
        AffineRows(base, delta.astype(np.float32), alphas)
    with pytest.raises(ValueError, match="not within the 6 rows"):
        AffineRows(base, delta, alphas, 2, 7)
    with pytest.raises(ValueError, match="not within these 4 rows"):
        AffineRows(base, delta, alphas).rows(1, 5).rows(0, 5)
    with pytest.raises(ValueError, match="3 rows of gradient for 6 rows"):
        AffineRows(base, delta, alphas).sum_by_example(np.zeros((3, 3, 4)))
