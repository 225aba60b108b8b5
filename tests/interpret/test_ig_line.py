"""Integrated gradients at "bert.embeddings" hold their points as lines (AffineRows,
npbert/interpret/affine_rows.py): run_from materializes the rows for the model, scales each row's
upstream gradient by its point's weight, and sums the rows' gradients per example.

That must equal the plain computation, one gradient per point, weighted and summed here
(run_from with the points as an array): float64, 1e-12 of the largest entry (the same sums in
another order: ~1e-15 relative per op; a wrong weight, example or point is 1e-3 or more)."""
import numpy as np
import pytest

import npbert
import npbert.interpret as ni
from npbert.interpret.gradients import _chunks
from npbert.interpret.layer_runs import layer_output, prepare_inputs, resolve_layer, run_from, tiled
from npbert.interpret.quadrature import step_sizes_and_alphas
from npbert.interpret.targets import resolve_target
from npbert.interpret.affine_rows import AffineRows

from interpret_helpers import TINY, rel

pytestmark = pytest.mark.usefixtures("npbert_path")

REL64 = 1e-12


def model_and_inputs(B, seed=0, dtype=np.float64, cls_name="BertForSequenceClassification"):
    model = getattr(npbert, cls_name)(npbert.BertConfig(**TINY), seed=seed, dtype=dtype).eval()
    rng = np.random.default_rng(seed + 1)
    ids = rng.integers(4, TINY["vocab_size"], size=(B, 7))
    ids[:, 0], ids[:, -1] = 2, 3
    types = (np.arange(7) >= 4).astype(np.int64)[None].repeat(B, axis=0)
    mask = np.ones((B, 7), dtype=np.int64)
    mask[-1, 5:] = 0                                               # the last example padded
    special = np.zeros((B, 7), dtype=np.int64)
    special[:, [0, -1]] = 1
    return model, {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "special_tokens_mask": special}


def points(x, x0, alphas):
    """x' + alpha_k (x - x'), step-major (S B, T, H), each alpha rounded to the dtype once."""
    return np.concatenate([x0 + x.dtype.type(a) * (x - x0) for a in alphas])


def plain_integrated_gradients(model, inputs, target, n_steps, internal_batch_size=None):
    """(x - x') * sum_k w_k g(x' + alpha_k (x - x')), each point's gradient from the model."""
    enc, special = prepare_inputs(model, inputs)
    layer = resolve_layer(model, "bert.embeddings")
    B, T = enc["input_ids"].shape
    x = layer_output(model, enc, layer)
    x0 = layer_output(model, enc, layer, ni.default_baseline_ids(model, enc, special))
    t = resolve_target(model, target, B, T)
    weights, alphas = step_sizes_and_alphas("gausslegendre", n_steps)
    total = np.zeros_like(x)
    for run in _chunks(n_steps, B, internal_batch_size):
        S = len(run)
        _, g, _ = run_from(model, tiled(enc, S), layer, points(x, x0, alphas[run]), t, B)
        total += (g.reshape((S,) + x.shape) * weights[run].reshape(S, 1, 1, 1)).sum(axis=0)
    return total * (x - x0)


@pytest.mark.parametrize("B, n_steps, internal_batch_size", [(1, 9, None), (3, 5, None), (3, 7, 7), (2, 1, None)])
def test_equals_one_gradient_per_point(B, n_steps, internal_batch_size):
    """(3, 5): 15 rows, halves of 7 and 8 cut inside a step; (3, 7, 7): runs of 2 points and a last
    of 1; (2, 1): one point, two rows."""
    model, inputs = model_and_inputs(B)
    got = ni.integrated_gradients(model, inputs, 1, n_steps=n_steps, internal_batch_size=internal_batch_size)
    expected = plain_integrated_gradients(model, inputs, 1, n_steps, internal_batch_size)
    assert rel(got.attributions, expected) <= REL64


def test_the_model_sums_weighted_rows(npbert_path):
    """run_from with an AffineRows and row weights: sum_r w_r dF_r/dx_r per example, also for a
    head that reads every row (token classification: no [CLS]-row layer) and a QA target."""
    for cls_name, target in (("BertForTokenClassification", (2, 1)), ("BertForQuestionAnswering", ("end", 4)),
                             ("BertForSequenceClassification", 1)):
        model, inputs = model_and_inputs(3, seed=4, cls_name=cls_name)
        enc, special = prepare_inputs(model, inputs)
        layer = resolve_layer(model, "bert.embeddings")
        x = layer_output(model, enc, layer)
        x0 = layer_output(model, enc, layer, ni.default_baseline_ids(model, enc, special))
        t = resolve_target(model, target, 3, 7)
        alphas, w = np.array([0.1, 0.5, 0.8, 1.0]), np.array([0.3, -1.0, 2.0, 0.5])
        _, summed, _ = run_from(model, tiled(enc, 4), layer, AffineRows(x0, x - x0, alphas), t, 3,
                                row_weights=np.repeat(w, 3))
        _, rows, _ = run_from(model, tiled(enc, 4), layer, points(x, x0, alphas), t, 3)
        expected = (rows.reshape(4, 3, 7, -1) * w.reshape(4, 1, 1, 1)).sum(axis=0)
        assert summed.shape == (3, 7, TINY["hidden_size"])
        assert rel(summed, expected) <= REL64, cls_name


def test_float32_within_its_round_off(npbert_path):
    """float32: the two ways round differently; 1e-4 of the largest attribution (float32's eps is
    1.2e-7, times the ~1e2 ops a gradient goes through and their condition); a wrong point is 1e-2."""
    model, inputs = model_and_inputs(2, seed=7, dtype=np.float32)
    got = ni.integrated_gradients(model, inputs, 0, n_steps=20).attributions
    expected = plain_integrated_gradients(model, inputs, 0, 20)
    assert got.dtype == np.float32
    assert rel(got, expected) <= 1e-4
