"""Gradient attributions with captum's names and semantics, each one backward (or a few) of the
model: saliency, input_x_gradient, integrated_gradients, layer_conductance.

    x                  the output of `layer` for the input (B, T, H) ("bert.embeddings": the
                       embeddings after LayerNorm; "bert.embeddings.word_embeddings": inputs_embeds)
    x'                 the same for the baseline (baselines.py: [CLS] + [PAD]... + [SEP])
    F                  the target, one number per example (targets.py)
    g(z) = dF/dz       the model's backward from F, read at the layer (layers.py: run_from)

    saliency           |g(x)|                                         captum Saliency (abs=True)
    input_x_gradient   x * g(x)                                       captum InputXGradient
    integrated_grads   (x - x') * sum_k w_k g(x' + alpha_k (x - x'))  captum LayerIntegratedGradients
    layer_conductance  sum_k (h(z_k+1) - h(z_k)) * dF/dh(z_k)         captum LayerConductance
                       z_k = x' + alpha_k (x - x'), h an encoder layer's output

Completeness: F(x) - F(x') = integral_0^1 dF(x' + a (x - x'))/da da = sum over (t, h) of
(x - x')_th integral_0^1 g_th(x' + a (x - x')) da, so the attributions of integrated gradients sum to
F(x) - F(x') up to the quadrature's error: the convergence delta, sum(attributions) - (F(x) - F(x'))
(per example, as captum's), measures that error.  Conductance telescopes the same way.

    B = examples, S = steps in one run, T = tokens, H = hidden size
"""
import time

import numpy as np

from npbert.interpret.affine_rows import AffineRows

from .baselines import baseline_ids_or_values, default_baseline_ids
from .layer_runs import layer_output, prepare_inputs, resolve_layer, run_from, tiled
from .quadrature import check_rule, step_sizes_and_alphas
from .targets import resolve_target

INPUT_LAYERS = ("word_embeddings", "embeddings")


class Attribution:
    """One method's attributions:

        attributions        (B, T, H)  per token and hidden unit of the layer
        token_attributions  (B, T)     attributions summed over H (the per-token scores)
        convergence_delta   (B,)       sum(attributions) - (F(x) - F(x')) when asked for, else None
        method, layer, target          what was computed, as strings"""

    def __init__(self, attributions, method, layer, target, convergence_delta=None):
        self.attributions = attributions
        self.token_attributions = attributions.sum(axis=-1)
        self.convergence_delta = convergence_delta
        self.method, self.layer, self.target = method, layer, target

    def __repr__(self):
        delta = "" if self.convergence_delta is None else f", convergence_delta={self.convergence_delta!r}"
        return (f"Attribution(method={self.method!r}, layer={self.layer!r}, target={self.target!r}, "
                f"attributions={self.attributions.shape}{delta})")


def _setup(model, inputs, target, layer, kinds=INPUT_LAYERS):
    layer = resolve_layer(model, layer, kinds)
    inputs, special = prepare_inputs(model, inputs)
    B, T = inputs["input_ids"].shape
    return layer, inputs, special, resolve_target(model, target, B, T), B


def _gradient_at_input(model, inputs, target, layer):
    layer, inputs, _, target, B = _setup(model, inputs, target, layer)
    x = layer_output(model, inputs, layer)                                          # (B, T, H)
    _, g, _ = run_from(model, inputs, layer, x, target, B)                          # (B, T, H)
    return layer, target, x, g


def saliency(model, inputs, target, layer="bert.embeddings", abs=True):
    """captum's Saliency on the layer's output: |dF/dx| (abs=True, captum's default) or dF/dx."""
    layer, target, _, g = _gradient_at_input(model, inputs, target, layer)
    return Attribution(np.abs(g) if abs else g, "saliency", layer.name, target.description)


def input_x_gradient(model, inputs, target, layer="bert.embeddings"):
    """captum's InputXGradient on the layer's output (LayerGradientXActivation): x * dF/dx."""
    layer, target, x, g = _gradient_at_input(model, inputs, target, layer)
    return Attribution(x * g, "input_x_gradient", layer.name, target.description)


def _endpoints(model, inputs, special, layer, baselines, tokenizer):
    """(x, x') at the layer, (B, T, H) each."""
    x = layer_output(model, inputs, layer)
    if baselines is None:
        return x, layer_output(model, inputs, layer, default_baseline_ids(model, inputs, special, tokenizer))
    kind, b = baseline_ids_or_values(model, inputs, baselines, model.config.hidden_size)
    return x, (b if kind == "values" else layer_output(model, inputs, layer, b))


def _chunks(n_points, B, internal_batch_size):
    """Runs of points, as captum's _batch_attribution splits them: max(1, internal_batch_size // B)
    points per run (all of them when internal_batch_size is None)."""
    if internal_batch_size is None:
        return [range(n_points)]
    if isinstance(internal_batch_size, bool) or not isinstance(internal_batch_size, (int, np.integer)) \
            or internal_batch_size < 1:
        raise ValueError(f"internal_batch_size must be a positive integer or None, got {internal_batch_size!r}")
    per = max(1, int(internal_batch_size) // B)
    return [range(a, min(a + per, n_points)) for a in range(0, n_points, per)]


def _path_points(x, x0, alphas):
    """x' + alpha_k (x - x') for the alphas given, stacked step-major: (S B, T, H)."""
    return AffineRows(x0, x - x0, alphas).materialize()


def _delta(model, inputs, layer, target, B, x, x0, attributions):
    """sum(attributions) - (F(x) - F(x')), per example (captum's compute_convergence_delta)."""
    F, _, _ = run_from(model, tiled(inputs, 2), layer, np.concatenate([x0, x]), target, B, with_grad=False)
    return attributions.reshape(B, -1).sum(axis=1) - (F[B:] - F[:B])


def integrated_gradients(model, inputs, target, baselines=None, n_steps=50, method="gausslegendre",
                         internal_batch_size=None, return_convergence_delta=False, layer="bert.embeddings",
                         captum_rounding=False, tokenizer=None, progress=None):
    """captum's LayerIntegratedGradients(forward, <layer>).attribute(input_ids, baselines, target, ...):

        attributions = (x - x') * sum_k w_k g(x' + alpha_k (x - x'))         (B, T, H)

    with captum's points and weights (quadrature.py; `captum_rounding=True` rounds them as captum
    does, for equality with it to round-off; the default uses them exactly).  The n_steps points
    run in batches of internal_batch_size rows (all at once by default); `progress`, if given, is
    called as progress(points done, n_steps, seconds, text) after each.  Returns an Attribution."""
    check_rule(method, n_steps)
    layer, inputs, special, target, B = _setup(model, inputs, target, layer)
    x, x0 = _endpoints(model, inputs, special, layer, baselines, tokenizer)
    weights, alphas = step_sizes_and_alphas(method, n_steps, captum_rounding)
    total = np.zeros_like(x)                                                        # (B, T, H)
    t0 = time.perf_counter()
    delta = x - x0                                                                  # (B, T, H)
    for run in _chunks(n_steps, B, internal_batch_size):
        S = len(run)
        if layer.kind == "embeddings":   # the points as a line (AffineRows), the weighted sum in the model
            points = AffineRows(x0, delta, alphas[run])
            _, g, _ = run_from(model, tiled(inputs, S), layer, points, target, B,
                               row_weights=np.repeat(weights[run], B))                # (B, T, H)
            total += g
        else:
            _, g, _ = run_from(model, tiled(inputs, S), layer, _path_points(x, x0, alphas[run]), target, B)
            g = g.reshape((S,) + x.shape)                                           # (S, B, T, H)
            total += (g * weights[run].reshape(S, 1, 1, 1)).sum(axis=0).astype(x.dtype, copy=False)
        if progress is not None:
            progress(run[-1] + 1, n_steps, time.perf_counter() - t0, "integration points")
    attributions = total * (x - x0)                                                 # (B, T, H)
    delta = _delta(model, inputs, layer, target, B, x, x0, attributions) if return_convergence_delta else None
    return Attribution(attributions, f"integrated_gradients ({method}, {n_steps} steps)", layer.name,
                       target.description, delta)


def layer_conductance(model, inputs, target, layer, baselines=None, n_steps=50, method="gausslegendre",
                      internal_batch_size=None, return_convergence_delta=False, input_layer="bert.embeddings",
                      captum_rounding=False, tokenizer=None, progress=None):
    """captum's LayerConductance(forward, <encoder layer>).attribute(x, x', target, ...), the path
    from the baseline to the input taken at `input_layer` (x and x' its outputs, as
    integrated_gradients), at the n_steps + 1 points alpha_0..alpha_n of `method`:

        conductance = sum_{k < n} (h(z_k+1) - h(z_k)) * dF/dh(z_k)           (B, T, H)

    h the output of `layer` ("bert.encoder.layer.i"), z_k = x' + alpha_k (x - x').  Returns an
    Attribution (its convergence delta: sum(conductance) - (F(x) - F(x'))).  `progress`: as
    integrated_gradients'."""
    check_rule(method, n_steps, min_steps=1)                         # n_steps + 1 points: 2 or more
    read = resolve_layer(model, layer, kinds=("encoder",))
    start, inputs, special, target, B = _setup(model, inputs, target, input_layer)
    x, x0 = _endpoints(model, inputs, special, start, baselines, tokenizer)
    _, alphas = step_sizes_and_alphas(method, n_steps + 1, captum_rounding)
    total, previous = None, None                                    # previous: (h, dF/dh) at the last point
    t0 = time.perf_counter()
    for run in _chunks(n_steps + 1, B, internal_batch_size):
        S = len(run)
        F, _, (h, dh) = run_from(model, tiled(inputs, S), start, _path_points(x, x0, alphas[run]), target, B,
                                 read_layer=read)
        h, dh = h.reshape((S,) + x.shape), dh.reshape((S,) + x.shape)               # (S, B, T, H)
        if previous is not None:                                     # the step across the runs' boundary
            h, dh = np.concatenate([previous[0][None], h]), np.concatenate([previous[1][None], dh])
        step = ((h[1:] - h[:-1]) * dh[:-1]).sum(axis=0)                             # (B, T, H)
        total = step if total is None else total + step
        previous = (h[-1], dh[-1])
        if progress is not None:
            progress(run[-1] + 1, n_steps + 1, time.perf_counter() - t0, "integration points")
    delta = _delta(model, inputs, start, target, B, x, x0, total) if return_convergence_delta else None
    return Attribution(total, f"layer_conductance ({method}, {n_steps} steps)", read.name, target.description, delta)
