"""Gradient checking: centred finite differences and cs231n's relative error.

Every hand-written backward in npbert is checked against the numbers this module
produces.  Use float64 for numerical gradients: with h = 1e-6 the centred
difference has a truncation error of order h^2 = 1e-12 and a round-off error of
order eps / h = 1e-16 / 1e-6 = 1e-10 (relative to the size of the function), so
float64 results agree with a correct analytic gradient to about 1e-8 or better;
in float32 (eps = 1.2e-7) the same difference would be pure noise.

rel_error is a max over entries, so it is set by the smallest gradient entries: an
entry of 1e-4 needs an absolute error below 1e-11 to pass 1e-7.  Through a deep
composition (a whole BERT layer) the 2-point difference cannot give that at any h;
`order=4` (the five-point stencil) with h ~ 1e-3 can: truncation ~h^4 f^(5), round-off
~eps |f| / h, both ~1e-12.

    numerical_gradient(f, x)              d f(x) / dx for a scalar f, every entry of x
    numerical_gradient_array(f, x, dout)  d sum(f(x) * dout) / dx for an array-valued f
    rel_error(x, y)                       max(|x - y| / max(1e-8, |x| + |y|))
    check_gradients(loss, arrays, grads)  analytic `grads` of `loss()` vs finite differences
    check_forward_backward(forward, backward, inputs)   a (out, cache) / backward pair
    check_model(model, inputs, upstream)  every parameter gradient of `model.backward`

The `check_*` helpers return {name: Comparison(rel_error, analytic, numerical)}.
"""
from collections import namedtuple

import numpy as np

Comparison = namedtuple("Comparison", ["rel_error", "analytic", "numerical"])
Comparison.__doc__ = """One gradient checked: the cs231n relative error and both gradients compared
(the whole arrays, or the sampled entries flattened when only some were checked)."""


def rel_error(x, y):
    """cs231n's relative error: max over entries of |x - y| / max(1e-8, |x| + |y|).

    Scale-free for entries away from zero; where both entries are below 1e-8 the floor
    turns it into an absolute error.  Shapes must match (no broadcasting).  0.0 when empty.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"rel_error: shapes differ, {x.shape} vs {y.shape}")
    if x.size == 0:
        return 0.0
    return float(np.max(np.abs(x - y) / np.maximum(1e-8, np.abs(x) + np.abs(y))))


# Centred-difference stencils: {k: c_k}, the derivative being sum_k c_k (f(x + k h) - f(x - k h)) / h.
# Order 2 is the classic (f(x+h) - f(x-h)) / 2h, error O(h^2); order 4 is
# (8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / 12h, error O(h^4).  Differencing symmetric
# pairs first keeps an exact 0 where f does not depend on the entry at all.
_STENCILS = {2: {1: 1 / 2}, 4: {1: 8 / 12, 2: -1 / 12}}


def _entries(f, x, indices, h, order=2):
    """Centred differences of the scalar f(x) at the given multi-indices of x (a float array).

    Each entry is set to x_i + k h and x_i - k h for each k of the stencil, then restored to its
    exact old value."""
    if order not in _STENCILS:
        raise ValueError(f"order must be one of {sorted(_STENCILS)}, got {order!r}")
    stencil = _STENCILS[order]
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"numerical gradients need a floating-point array, got {x.dtype}")
    if not x.flags.writeable:
        raise ValueError("numerical gradients perturb x in place: it must be writeable")
    out = np.empty(len(indices), dtype=np.float64)
    for n, ix in enumerate(indices):
        old = x[ix]
        total = 0.0
        try:
            for k, c in stencil.items():
                x[ix] = old + k * h
                f_plus = float(f(x))
                x[ix] = old - k * h
                f_minus = float(f(x))
                total += c * (f_plus - f_minus)
        finally:
            x[ix] = old                               # restored even if f raises
        out[n] = total / h
    return out


def numerical_gradient(f, x, h=1e-6, order=2):
    """The gradient of the scalar `f(x)` with respect to every entry of `x`, by centred differences:

        df/dx_i ~ (f(x + h e_i) - f(x - h e_i)) / (2 h)

    `x` is perturbed in place, one entry at a time, and restored exactly, so `f` may
    ignore its argument and read `x` through a closure (a model parameter, say).
    Costs 2 * x.size calls of f.  `order=4` uses the five-point centred stencil

        df/dx_i ~ (f(x - 2h e_i) - 8 f(x - h e_i) + 8 f(x + h e_i) - f(x + 2h e_i)) / (12 h)

    (error O(h^4), 4 * x.size calls): with h = 1e-3 its truncation error is ~1e-12 |f^(5)| and
    its round-off ~eps |f| / h ~ 1e-13 |f|, which checks gradients through deep compositions (a
    whole BERT layer) where the 2-point difference's O(h^2) term is visible.
    Returns a float64 array shaped like x.
    """
    indices = list(np.ndindex(*x.shape))
    return _entries(f, x, indices, h, order).reshape(x.shape)


def numerical_gradient_array(f, x, dout, h=1e-6, order=2):
    """The gradient of sum(f(x) * dout) with respect to x, for an array-valued f."""
    return numerical_gradient(lambda x_: np.sum(f(x_) * dout, dtype=np.float64), x, h, order)


def check_gradients(loss, arrays, grads, h=1e-6, order=2, max_entries=None, seed=0):
    """Compare analytic gradients with centred differences of `loss`.

    Args:
        loss: a function of no arguments returning a scalar computed from the current
            contents of the arrays in `arrays` (they are perturbed in place).
        arrays: {name: array} the gradients are taken with respect to.
        grads: {name: analytic gradient}, same keys; each must have its array's shape.
        h, order: the finite-difference step and stencil (see `numerical_gradient`).
        max_entries: if set, check at most this many randomly chosen entries per array.
        seed: chooses those entries.
    Returns:
        {name: Comparison(rel_error, analytic, numerical)}.
    """
    if set(arrays) != set(grads):
        raise KeyError(f"check_gradients: arrays {sorted(arrays)} and grads {sorted(grads)} differ")
    rng = np.random.default_rng(seed)
    result = {}
    for name, x in arrays.items():
        g = np.asarray(grads[name])
        if g.shape != x.shape:
            raise ValueError(f"the gradient of {name} has shape {g.shape}, the array has shape {x.shape}")
        indices = list(np.ndindex(*x.shape))
        if max_entries is not None and len(indices) > max_entries:
            chosen = rng.choice(len(indices), size=max_entries, replace=False)
            indices = [indices[i] for i in sorted(chosen)]
            analytic = np.array([g[ix] for ix in indices], dtype=np.float64)
            numerical = _entries(lambda _x: loss(), x, indices, h, order)
        else:
            analytic = g.astype(np.float64)
            numerical = _entries(lambda _x: loss(), x, indices, h, order).reshape(x.shape)
        result[name] = Comparison(rel_error(analytic, numerical), analytic, numerical)
    return result


def check_forward_backward(forward, backward, inputs, dout=None, h=1e-6, order=2, seed=0):
    """Check a leaf op or module against finite differences.

    Args:
        forward: forward(**inputs) -> (out, cache); out is one array.
        backward: backward(dout, cache) -> {name: gradient of sum(out * dout) w.r.t. inputs[name]}
            for the inputs (and parameters) it differentiates.
        inputs: {name: array or other argument}; the arrays named by backward are perturbed.
        dout: the upstream gradient; by default standard normal of out's shape and dtype.
    Returns:
        {name: Comparison} for every name backward returned.
    """
    out, cache = forward(**inputs)
    if dout is None:
        dout = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
    analytic = backward(dout, cache)

    def loss():
        return np.sum(forward(**inputs)[0] * dout, dtype=np.float64)

    return check_gradients(loss, {k: inputs[k] for k in analytic}, analytic, h=h, order=order)


def model_loss(output, upstream):
    """sum over the named outputs of sum(output * upstream); list-valued outputs
    (hidden_states, attentions) are paired entry by entry, None entries skipped."""
    total = 0.0
    for name, d in upstream.items():
        if d is None:
            continue
        value = getattr(output, name)
        if isinstance(d, (list, tuple)):
            total += sum(float(np.sum(v * di, dtype=np.float64)) for v, di in zip(value, d) if di is not None)
        else:
            total += float(np.sum(value * d, dtype=np.float64))
    return total


def check_model(model, inputs, upstream, names=None, h=1e-6, order=2, max_entries=None, seed=0):
    """Check `model.backward(**upstream)` against finite differences of `model_loss`.

    Runs `model(**inputs)`, takes the analytic gradients, then perturbs each parameter
    in `model.state.params` (or only `names`) in place.  When `inputs` has
    `inputs_embeds`, its gradient (`model.inputs_embeds_grad`) is checked under the
    name "inputs_embeds".  In train() mode the dropout generator is rewound before every
    forward, so every evaluation draws the same masks: the check is then of the function
    with the masks held fixed, which is what the backward differentiates.

    Returns:
        {name: Comparison}.
    """
    rng_state = model.state.rng.bit_generator.state

    def forward():
        model.state.rng.bit_generator.state = rng_state
        return model(**inputs)

    forward()
    grads = model.backward(**upstream)
    params = model.state.params
    names = list(params) if names is None else list(names)
    arrays = {}
    analytic = {}
    for name in names:
        if name == "inputs_embeds":
            arrays[name], analytic[name] = inputs["inputs_embeds"], model.inputs_embeds_grad
        else:
            arrays[name], analytic[name] = params[name], grads[name]
    return check_gradients(lambda: model_loss(forward(), upstream), arrays, analytic,
                           h=h, order=order, max_entries=max_entries, seed=seed)
