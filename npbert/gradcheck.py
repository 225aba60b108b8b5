"""Gradient checking: centred finite differences, cs231n's relative error, and a verdict per
entry that does not cry wolf.

    numerical_gradient(f, x)              d f(x) / dx for a scalar f, every entry of x
    numerical_gradient_array(f, x, dout)  d sum(f(x) * dout) / dx for an array-valued f
    rel_error(x, y)                       max(|x - y| / max(1e-8, |x| + |y|))
    check_gradients(loss, arrays, grads)  analytic `grads` of `loss()` vs finite differences
    check_forward_backward(forward, backward, inputs)   a (out, cache) / backward pair
    check_model(model, inputs, upstream)  every parameter gradient of `model.backward`

Use float64: in float32 (eps = 1.2e-7) any difference quotient is noise.

The `check_*` helpers return {name: Comparison}: `ok` is the verdict, `error` the figure
behind it, `bad` the entries that failed.  The recipe (why each part, docs/testing_your_bert.md):

- The first estimate of each entry is the five-point centred difference with h = 1e-3
  (truncation ~h^4 f^(5), round-off ~eps |f| / h: both ~1e-12 through a whole BERT layer).
- An entry agrees when |a - n| <= tol * max(|a| + |n|, floor * S) + noise(h): relative error
  tol (1e-7, cs231n's threshold) on entries of ordinary size; an absolute floor tied to S, the
  largest gradient entry of everything checked together (the layer, the model), so that an
  entry that is zero in exact arithmetic (the key bias; a LayerNorm of width 2) is judged
  against the scale of its neighbours and not against its own round-off (cs231n's fixed 1e-8
  floor fails those); and noise(h) = 10 eps Lambda / h, the round-off of the difference quotient,
  Lambda being the sum of |terms| of the loss.
- An entry that does not agree at the first step is doubtful, not wrong: it is estimated
  again with the five-point stencil at steps 1e-3 * 4^-k * max(1, |x_i|), k = 0..5, smaller
  each time (a LayerNorm row whose spread is near sqrt(eps) varies on that scale; a ReLU kink
  within h of the entry).  It agrees as soon as one estimate agrees; it is wrong as soon as two
  successive estimates whose truncation errors differ a lot (another stencil, or a step at
  least 4 times smaller) agree with each other but not with the analytic value (the
  differences have converged, elsewhere); if neither happens it is unresolved, bad too.
"""
from collections import namedtuple

import numpy as np

__all__ = ["numerical_gradient", "numerical_gradient_array", "rel_error", "check_gradients", "check_forward_backward",
           "check_model", "model_loss", "Comparison"]

Comparison = namedtuple("Comparison", ["rel_error", "analytic", "numerical", "error", "ok", "bad", "note"])
Comparison.__doc__ = """One gradient checked.

    rel_error   cs231n's relative error of analytic vs numerical (kept for comparison; its fixed
                1e-8 floor makes it large on entries that are ~0 in exact arithmetic)
    analytic, numerical   both gradients compared (the whole arrays, or the sampled entries
                flattened when only some were checked); numerical holds each entry's deciding estimate
    error       max |a - n| / max(|a| + |n|, floor * scale): the relative error with the floor
                tied to the scale of all gradients checked together
    ok          True when every entry agreed (see the module docstring)
    bad         the multi-indices (into the array) of the entries that did not agree
    note        what else happened: entries refined with smaller steps, the padding rule"""

TOL = 1e-7                 # relative error an entry must meet (cs231n's threshold in float64)
FLOOR = 1e-3               # entries below FLOOR * scale are judged absolutely, against that
FIRST_STEP, FIRST_ORDER = 1e-3, 4
LADDER = tuple(1e-3 * 4.0 ** -k for k in range(6))      # refinement steps (x max(1, |x_i|)), order 4
NOISE = 10.0               # noise(h) = NOISE * eps * Lambda / h


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


def _check_array(x, order):
    if order not in _STENCILS:
        raise ValueError(f"order must be one of {sorted(_STENCILS)}, got {order!r}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"numerical gradients need a floating-point array, got {x.dtype}")
    if not x.flags.writeable:
        raise ValueError("numerical gradients perturb x in place: it must be writeable")


def _difference(f, x, ix, h, order):
    """The centred difference of the scalar f(x) at multi-index ix of x: the entry is set to
    x_i + k h and x_i - k h for each k of the stencil, then restored to its exact old value."""
    old = x[ix]
    total = 0.0
    try:
        for k, c in _STENCILS[order].items():
            x[ix] = old + k * h
            f_plus = float(f(x))
            x[ix] = old - k * h
            f_minus = float(f(x))
            total += c * (f_plus - f_minus)
    finally:
        x[ix] = old                                   # restored even if f raises
    return total / h


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
    A fixed step for every entry and no verdict: `check_gradients` decides per entry.
    Returns a float64 array shaped like x.
    """
    _check_array(x, order)
    out = np.array([_difference(f, x, ix, h, order) for ix in np.ndindex(*x.shape)], dtype=np.float64)
    return out.reshape(x.shape)


def numerical_gradient_array(f, x, dout, h=1e-6, order=2):
    """The gradient of sum(f(x) * dout) with respect to x, for an array-valued f."""
    return numerical_gradient(lambda x_: np.sum(f(x_) * dout, dtype=np.float64), x, h, order)


def _judge(f, x, ix, a, h, order, tol, floor_abs, loss_scale):
    """One entry: (deciding estimate, "ok" | "wrong" | "unresolved", number of estimates made)."""
    eps = np.finfo(np.float64).eps

    def agree(u, v, noise):
        return abs(u - v) <= tol * max(abs(u) + abs(v), floor_abs) + noise

    size = max(1.0, abs(float(x[ix])))
    steps = [(h, order)] + [(s * size, 4) for s in LADDER if not (order == 4 and s * size == h)]
    previous = None
    for n, (step, k) in enumerate(steps, 1):
        estimate = _difference(f, x, ix, step, k)
        noise = NOISE * eps * loss_scale / step
        if agree(a, estimate, noise):
            return estimate, "ok", n
        # Converged elsewhere: two estimates whose truncation errors differ a lot (another
        # stencil, or a step 4 times smaller: the five-point error falls 256-fold) agree.
        if previous is not None and (previous[3] != k or previous[2] >= 4 * step) \
                and agree(previous[0], estimate, previous[1] + noise):
            return estimate, "wrong", n
        previous = (estimate, noise, step, k)
    return estimate, "unresolved", len(steps)


def _compare(f, x, g, indices, h, order, tol, floor_abs, loss_scale, full):
    """Judge the entries `indices` of x against the analytic gradient g -> Comparison.
    f: f(x) -> scalar, or a function of the index giving that entry's f (the padding rule)."""
    _check_array(x, order)
    analytic = np.array([g[ix] for ix in indices], dtype=np.float64)
    numerical = np.empty(len(indices), dtype=np.float64)
    bad, refined, states = [], 0, {"wrong": 0, "unresolved": 0}
    for n, (ix, a) in enumerate(zip(indices, analytic)):
        fi = f(ix) if getattr(f, "per_entry", False) else f
        numerical[n], state, tries = _judge(fi, x, ix, float(a), h, order, tol, floor_abs, loss_scale)
        refined += tries > 1
        if state != "ok":
            bad.append(ix)
            states[state] += 1
    if full:
        analytic, numerical = analytic.reshape(x.shape), numerical.reshape(x.shape)
    error = 0.0
    if analytic.size:
        error = float(np.max(np.abs(analytic - numerical) / np.maximum(np.abs(analytic) + np.abs(numerical),
                                                                       floor_abs)))
    notes = []
    if refined:
        notes.append(f"{refined} of {len(indices)} entries estimated again with smaller steps")
    notes += [f"{c} {s}" for s, c in states.items() if c]
    return Comparison(rel_error(analytic, numerical), analytic, numerical, error, not bad, tuple(bad),
                      "; ".join(notes))


def check_gradients(loss, arrays, grads, h=FIRST_STEP, order=FIRST_ORDER, max_entries=None, seed=0,
                    tol=TOL, floor=FLOOR, scale=None, loss_scale=None):
    """Compare analytic gradients with finite differences of `loss`, entry by entry (the recipe
    in the module docstring).

    Args:
        loss: a function of no arguments returning a scalar computed from the current
            contents of the arrays in `arrays` (they are perturbed in place).
        arrays: {name: array} the gradients are taken with respect to (float64 please).
        grads: {name: analytic gradient}, same keys; each must have its array's shape.
        h, order: the first step and stencil (see `numerical_gradient`); doubtful entries
            are refined from there.
        max_entries: if set, check at most this many randomly chosen entries per array.
        seed: chooses those entries.
        tol: the relative error an entry must meet.
        floor: entries below floor * scale are judged absolutely, against floor * scale.
        scale: the gradients' scale; by default the largest |entry| of all `grads`.
        loss_scale: Lambda, the size of the terms summed into the loss (its round-off is
            ~eps * Lambda); by default |loss()|.  Pass sum(|terms|) when the loss cancels.
    Returns:
        {name: Comparison}.
    """
    if set(arrays) != set(grads):
        raise KeyError(f"check_gradients: arrays {sorted(arrays)} and grads {sorted(grads)} differ")
    return _check_all(loss, arrays, grads, h, order, max_entries, seed, tol, floor, scale, loss_scale)


def _check_all(loss, arrays, grads, h, order, max_entries, seed, tol, floor, scale, loss_scale,
               special=None):
    """check_gradients; special: {name: (fn(ix) -> that entry's f, note, row)} for an array whose
    entries are differentiated through another function (check_model's padding rule); the note
    is added when entries of that row were checked."""
    grads = {name: np.asarray(g) for name, g in grads.items()}
    for name, x in arrays.items():
        if grads[name].shape != x.shape:
            raise ValueError(f"the gradient of {name} has shape {grads[name].shape}, the array has shape {x.shape}")
    if scale is None:
        scale = max((float(np.max(np.abs(g))) for g in grads.values() if g.size), default=0.0)
    floor_abs = max(floor * scale, np.finfo(np.float64).tiny)
    if loss_scale is None:
        loss_scale = abs(float(loss()))
    rng = np.random.default_rng(seed)
    f = lambda _x: loss()                                        # noqa: E731
    result = {}
    for name, x in arrays.items():
        full = max_entries is None or x.size <= max_entries
        if full:
            indices = list(np.ndindex(*x.shape))
        else:                                     # (no list of every index: a word table has millions)
            chosen = rng.choice(x.size, size=max_entries, replace=False)
            indices = [tuple(int(i) for i in np.unravel_index(k, x.shape)) for k in sorted(chosen)]
        fn, note, row = (f, "", None) if special is None or name not in special else special[name]
        c = _compare(fn, x, grads[name], indices, h, order, tol, floor_abs, loss_scale, full)
        if any(ix[0] == row for ix in indices):
            c = c._replace(note="; ".join(s for s in (note, c.note) if s))
        result[name] = c
    return result


def check_forward_backward(forward, backward, inputs, dout=None, h=FIRST_STEP, order=FIRST_ORDER, seed=0,
                           max_entries=None, tol=TOL, floor=FLOOR):
    """Check a leaf op, a module or your own layer against finite differences.

    Args:
        forward: forward(**inputs) -> (out, cache); out is one array.
        backward: backward(dout, cache) -> {name: gradient of sum(out * dout) w.r.t. inputs[name]}
            for the inputs (and parameters) it differentiates.
        inputs: {name: array or other argument}; the arrays named by backward are perturbed.
        dout: the upstream gradient; by default standard normal of out's shape and dtype.
        max_entries: if set, check at most this many randomly chosen entries per input.
    Returns:
        {name: Comparison} for every name backward returned.
    """
    out, cache = forward(**inputs)
    if dout is None:
        dout = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
    analytic = backward(dout, cache)

    def loss():
        return np.sum(forward(**inputs)[0] * dout, dtype=np.float64)

    loss_scale = float(np.sum(np.abs(out * dout), dtype=np.float64))
    return _check_all(loss, {k: inputs[k] for k in analytic}, analytic, h, order, max_entries, seed, tol,
                      floor, None, loss_scale)


def model_loss(output, upstream, absolute=False):
    """sum over the named outputs of sum(output * upstream); list-valued outputs
    (hidden_states, attentions) are paired entry by entry, None entries skipped.
    absolute=True: the sum of |output * upstream| instead (the size of the loss's terms)."""
    size = np.abs if absolute else (lambda a: a)
    total = 0.0
    for name, d in upstream.items():
        if d is None:
            continue
        value = getattr(output, name)
        if isinstance(d, (list, tuple)):
            total += sum(float(np.sum(size(v * di), dtype=np.float64)) for v, di in zip(value, d) if di is not None)
        else:
            total += float(np.sum(size(value * d), dtype=np.float64))
    return total


def check_model(model, inputs, upstream, names=None, h=FIRST_STEP, order=FIRST_ORDER, max_entries=None, seed=0,
                tol=TOL, floor=FLOOR):
    """Check `model.backward(**upstream)` against finite differences of `model_loss`.

    Runs `model(**inputs)`, takes the analytic gradients, then perturbs each parameter
    in `model.state.params` (or only `names`) in place.  When `inputs` has
    `inputs_embeds`, its gradient (`model.inputs_embeds_grad`) is checked under the
    name "inputs_embeds".  In train() mode the dropout generator is rewound before every
    forward, so every evaluation draws the same masks: the check is then of the function
    with the masks held fixed, which is what the backward differentiates.

    The padding row follows torch's rule, as the backward does: the lookup of
    `word_embeddings.weight[pad_token_id]` passes no gradient (nn.Embedding(padding_idx)).
    So when `input_ids` hold the pad id, that row's entries are differentiated with the lookup
    held fixed (the forward is given inputs_embeds = W[input_ids] computed once): 0 for a plain
    BertModel, the decoder's part alone where the table is tied to the MLM decoder.  Its
    Comparison's note says so.  The scale the floor is tied to is the largest entry of all the
    model's gradients, whichever `names` are checked.

    Returns:
        {name: Comparison}.
    """
    rng_state = model.state.rng.bit_generator.state

    def forward(**override):
        model.state.rng.bit_generator.state = rng_state
        return model(**{**inputs, **override})

    out = forward()
    grads = model.backward(**upstream)
    params = model.state.params
    names = list(params) if names is None else list(names)
    arrays, analytic = {}, {}
    for name in names:
        if name == "inputs_embeds":
            arrays[name], analytic[name] = inputs["inputs_embeds"], model.inputs_embeds_grad
        else:
            arrays[name], analytic[name] = params[name], grads[name]
    scale = max(float(np.max(np.abs(g))) for g in [*grads.values(), *analytic.values()] if np.size(g))
    special = _padding_rule(model, inputs, upstream, names, forward)
    return _check_all(lambda: model_loss(forward(), upstream), arrays, analytic, h, order, max_entries, seed,
                      tol, floor, scale, model_loss(out, upstream, absolute=True), special)


def _padding_rule(model, inputs, upstream, names, forward):
    """{word-embedding name: (fn, note, pad row)} when input_ids hold the pad id: fn(ix) is the loss to
    difference for entry ix, the lookup held fixed on the padding row."""
    pad = getattr(model.config, "pad_token_id", None)
    ids = inputs.get("input_ids")
    word = [n for n in names if n.endswith("embeddings.word_embeddings.weight")]
    if pad is None or ids is None or not word or not np.any(np.asarray(ids) == pad):
        return None
    name = word[0]
    table = model.state.params[name]
    fixed = {"input_ids": None, "inputs_embeds": table[np.asarray(ids)]}      # W[ids], looked up once
    plain = model_loss(forward(), upstream)
    held = model_loss(forward(**fixed), upstream)
    if not np.isclose(plain, held, rtol=1e-12, atol=0.0):
        raise ValueError(f"check_model: {type(model).__name__} gives another loss with inputs_embeds = "
                         f"W[input_ids] ({held!r}) than with input_ids ({plain!r}), so the padding row "
                         f"{pad} cannot be differentiated with its lookup held fixed")

    def entry_loss(ix):
        if ix[0] == pad:
            return lambda _x: model_loss(forward(**fixed), upstream)
        return lambda _x: model_loss(forward(), upstream)
    entry_loss.per_entry = True
    return {name: (entry_loss, f"row {pad} (pad_token_id): its lookup passes no gradient (torch's padding_idx), "
                               "so it is differentiated with the lookup held fixed", pad)}
