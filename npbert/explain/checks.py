"""What the page and the text walk check, and how: one comparison for a recomputed tensor
(compare), and npbert.gradcheck's comparisons for every gradient checked against finite
differences (gradient_check, output_gradient_check): one gradient checker, one verdict rule.

    B = batch, T = sequence length, H = hidden size
"""
import numpy as np

from npbert import gradcheck

ENTRIES = 3               # per checked tensor: random entries of the row holding its largest |gradient|;
                          # five-point differences, 4 forwards each: 12 forwards a tensor
FULL_CHECK_MAX = 60       # check every parameter tensor when the model has at most this many
SAME_RULE = "max|diff| <= tol (1 + max|value|)"
GRADCHECK_RULE = (f"npbert.gradcheck: |analytic - numeric| <= {gradcheck.TOL:g} max(|a| + |n|, "
                  f"{gradcheck.FLOOR:g} max|grad|) + round-off, five-point differences")


class Checks:
    """Collects named pass/fail results for the final verdict."""

    def __init__(self):
        self.failed = []
        self.count = 0

    def add(self, name, ok):
        self.count += 1
        if not ok:
            self.failed.append(name)
        return ok


def compare(checks, name, mine, ref, tol, what=None):
    """A recomputed tensor against the model's: max|diff| <= tol (1 + max|ref|).  `what`: the
    sentence the page shows (default "= name of the model").  Returns the check as the page stores it."""
    mine, ref = np.asarray(mine, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    diff = float(np.max(np.abs(mine - ref))) if mine.shape == ref.shape else float("inf")
    ok = checks.add(name, diff <= tol * (1.0 + float(np.max(np.abs(ref)))))
    return {"against": name, "what": what or f"= {name} of the model", "max_abs_diff": diff, "tol": tol, "ok": ok,
            "rule": SAME_RULE}


def note(check):
    """The text walk's line for a check."""
    return f"{check['what']}: max|diff| {check['max_abs_diff']:.1e}  {'ok' if check['ok'] else 'MISMATCH'}"


def concat(grads, names):
    """The gradients `names` of a {name: array} dict, flattened into one vector (one check over all)."""
    return np.concatenate([grads[n].ravel() for n in names])


def _gradcheck_summary(checks, name, comparisons, what):
    """The check as the page stores it, from {name: gradcheck.Comparison}."""
    diff = max((float(np.max(np.abs(c.analytic - c.numerical))) for c in comparisons.values()), default=0.0)
    ok = checks.add(name, all(c.ok for c in comparisons.values()))
    return {"against": name, "what": what, "max_abs_diff": diff, "tol": gradcheck.TOL, "ok": ok,
            "rule": GRADCHECK_RULE}


def output_gradient_check(checks, loss_of, outputs, dout, what):
    """d loss / d outputs (dout, {name: array}) against npbert.gradcheck's finite differences of
    loss_of({name: array}) on ENTRIES entries of each output."""
    arrays = {name: np.array(outputs[name], dtype=np.float64) for name in dout}        # perturbed in place

    def loss():
        return loss_of({**outputs, **arrays})
    result = gradcheck.check_gradients(loss, arrays, dout, max_entries=ENTRIES)
    return _gradcheck_summary(checks, "d loss / d outputs", result, what)


# ---- the gradient check of a model's backward ----------------------------------------------

def checked_names(names):
    """Every parameter of a small model.  Of a large one: the embeddings, the first layer and the
    pooler (and a task head's own parameters).  Their gradients pass through every layer's backward
    on the way down, so a mistake anywhere above shows up in them."""
    if len(names) <= FULL_CHECK_MAX:
        return list(names)
    head = any(n.startswith("bert.") for n in names)         # a task head: BERT's names under "bert."
    return [n for n in names if (head and not n.startswith("bert."))
            or n.removeprefix("bert.").startswith(("embeddings.", "encoder.layer.0.", "pooler."))]


def _row(x, g):
    """(index, x's row, g's row): the row (last axis) of x where |g| is largest, x's as a view (the
    check perturbs it in place, which perturbs x)."""
    x2, g2 = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])                  # (R, C)
    r = int(np.argmax(np.abs(g2).max(axis=1)))
    assert np.shares_memory(x2, x), "the parameter must be contiguous: its row is perturbed in place"
    return r, x2[r], g2[r]


def gradient_check(model, inputs, upstream, out, checks, seed=0, call=""):
    """model.backward(**upstream) (upstream {"loss": 1.0} after a forward given labels) against
    npbert.gradcheck.check_gradients, float64, on ENTRIES random entries of one row of every
    checked parameter and of the input embeddings: the row holding the tensor's largest |gradient|
    (a word-embedding row of a token of the text, not one of the untouched rows).  Prints the
    table to `out`; returns how many tensors were checked."""
    def loss(**override):
        return gradcheck.model_loss(model(**{**inputs, **override}), upstream)
    output = model(**inputs)
    grads = model.backward(**upstream)
    dembeds = model.inputs_embeds_grad                                      # (B, T, H)
    params = model.state_dict()
    expected = [n for n, _ in model.named_parameters()]                     # a tied weight once
    shapes_ok = checks.add("gradient keys and shapes",
                           list(grads) == expected and all(grads[n].shape == params[n].shape for n in expected))
    print(f"  grads = model.backward({call}): {len(grads)} tensors, keys "
          f"{'=' if list(grads) == expected else '!='} named_parameters(), shapes "
          f"{'all match' if shapes_ok else 'DIFFER'}", file=out)
    print(f"  d loss / d inputs_embeds = model.inputs_embeds_grad, shape {tuple(dembeds.shape)}", file=out)
    names = checked_names(expected)
    if len(names) < len(expected):
        print(f"  checked: the embeddings, encoder.layer.0 and the pooler ({len(names)} of {len(expected)} tensors; "
              "their gradients pass through every layer above)", file=out)
    word = next(n for n in expected if n.endswith("embeddings.word_embeddings.weight"))
    embeds = params[word][inputs["input_ids"]].reshape(dembeds.shape)       # (B, T, H): the same function
    rows, arrays, analytic = {}, {}, {}
    for name, x, g in [("inputs_embeds", embeds, dembeds)] + [(n, params[n], grads[n]) for n in names]:
        rows[name], arrays[name], analytic[name] = _row(x, g)
    scale = max(float(np.max(np.abs(g))) for g in [*grads.values(), dembeds] if g.size)
    loss_scale = gradcheck.model_loss(output, upstream, absolute=True)      # the size of the loss's terms

    def check(f, keys):
        return gradcheck.check_gradients(f, {k: arrays[k] for k in keys}, {k: analytic[k] for k in keys},
                                         max_entries=ENTRIES, seed=seed, scale=scale, loss_scale=loss_scale)
    result = check(lambda: loss(input_ids=None, inputs_embeds=embeds), ["inputs_embeds"])   # the same function
    result.update(check(loss, names))
    print(f"  against npbert.gradcheck.check_gradients (float64): {ENTRIES} random entries of the row holding each "
          f"tensor's largest |grad|;\n  verdict: {GRADCHECK_RULE}", file=out)
    print(f"\n  {'tensor':<49} {'shape':<13} {'row':>5} {'max|grad|':>10} {'error':>10} {'verdict':>8}", file=out)
    for name, c in result.items():
        shape = str(tuple(embeds.shape if name == "inputs_embeds" else params[name].shape))
        checks.add(name, c.ok)
        print(f"  {name:<49} {shape:<13} {rows[name]:>5} {np.max(np.abs(analytic[name])):>10.2e} {c.error:>10.1e} "
              f"{'ok' if c.ok else 'FAIL':>8}", file=out)
    print("  (*) error: max |a - n| / max(|a| + |n|, floor): an entry that is 0 in exact arithmetic (a key bias:\n"
          "      softmax ignores what it adds to a whole row, docs/backward.md) is judged against the floor", file=out)
    return len(result)
