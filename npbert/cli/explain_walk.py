"""`npbert explain`'s two walks: the forward pass stage by stage, printed from npbert/reference.py
(the whole BERT as plain functions over the state dict) and checked against the model's own
outputs, and model.backward() checked against finite differences in float64.

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size
"""
import numpy as np

from npbert import reference
from npbert.gradcheck import rel_error

REL_TOL = 1e-6            # finite differences vs backward, float64, per checked tensor
EPS = 1e-5                # finite-difference step
ENTRIES = (3, 3)          # per checked tensor: the entries with the largest |grad|, random entries
ROUNDOFF = 1e-15          # relative round-off of a float64 loss, for the finite differences' floor
FULL_CHECK_MAX = 60       # check every parameter tensor when the model has at most this many


# ---- printing --------------------------------------------------------------------------------

class Table:
    """Rows of (name, shape, dims, summary numbers), aligned; a check goes on the line below its row."""

    HEAD = f"  {'tensor':<48} {'shape':<15} {'dims':<7} {'mean':>9} {'std':>9} {'min':>9} {'max':>9}"

    def __init__(self, out):
        self.out = out

    def header(self):
        print(self.HEAD, file=self.out)

    def section(self, title):
        print(f"  -- {title} " + "-" * max(0, len(self.HEAD) - len(title) - 6), file=self.out)

    def row(self, name, x, dims, note=""):
        x64 = np.asarray(x, dtype=np.float64)
        shape = str(tuple(x.shape))
        print(f"  {name:<48} {shape:<15} {dims:<7} {x64.mean():>9.4f} {x64.std():>9.4f} "
              f"{x64.min():>9.4f} {x64.max():>9.4f}", file=self.out)
        if note:
            print(f"      {note}", file=self.out)


# float64 backward walk against the model's backward: the same ops in float64, summed in another
# order in places (the fast path), so round-off of ~1e-15 relative; 1e-9 leaves a wide margin while
# a wrong stage (a missing residual, a transposed head) is off by O(1).
BACKWARD_TOL = 1e-9


def check(name, mine, ref, tol, checks, what=None):
    """mine against ref: max|diff| <= tol (1 + max|ref|), as the text explain's checks.  `what`: the
    sentence the page shows (default: "= name of the model")."""
    mine, ref = np.asarray(mine, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    diff = float(np.max(np.abs(mine - ref))) if mine.shape == ref.shape else float("inf")
    ok = checks.add(name, diff <= tol * (1.0 + float(np.max(np.abs(ref)))))
    return {"against": name, "what": what or f"= {name} of the model", "max_abs_diff": diff, "tol": tol, "ok": ok}



def concat(grads, names):
    """The gradients `names` of a {name: array} dict, flattened into one vector (one check over all)."""
    return np.concatenate([grads[n].ravel() for n in names])


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


def _same(name, mine, model_value, tol, checks):
    """The note for a recomputed tensor checked against the model's own output."""
    mine = np.asarray(mine, dtype=np.float64)
    ref = np.asarray(model_value, dtype=np.float64)
    diff = float(np.max(np.abs(mine - ref))) if mine.shape == ref.shape else float("inf")
    ok = checks.add(name, diff <= tol * (1.0 + float(np.max(np.abs(ref)))))
    return f"= {name} of the model: max|diff| {diff:.1e}  {'ok' if ok else 'MISMATCH'}"


# ---- the forward walk ------------------------------------------------------------------------

def walk_forward(model, ids, attention_mask, out, checks):
    """Print every tensor of the forward pass as npbert/reference.py computes it from the
    parameters (its functions keep each activation under a name), checked against what the model
    itself returned.  Read along with docs/embeddings.md, docs/attention.md, docs/feed_forward.md,
    docs/encoder.md."""
    c = model.config
    p = model.state_dict()                       # the model's own arrays, keyed as transformers'
    dtype = model.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    B, T = ids.shape
    output = model(input_ids=ids, attention_mask=attention_mask,
                   output_hidden_states=True, output_attentions=True)

    table = Table(out)
    table.header()

    # BertEmbeddings: embeddings = LayerNorm(word[ids] + token_type[types] + position[positions])
    table.section("embeddings  (BertEmbeddings, docs/embeddings.md)")
    token_type_ids = np.zeros((B, T), dtype=np.int64)                      # (B, T), the default
    position_ids = np.arange(T)[None, :].repeat(B, axis=0)                  # (B, T), the default
    x, cache = reference.embeddings_forward(p, c, ids, token_type_ids, position_ids)   # (B, T, H); eval: no dropout
    e = cache["acts"]
    table.row("embeddings.word_embeddings.weight[input_ids]", e["word"], "B,T,H")
    table.row("embeddings.token_type_embeddings.weight[types]", e["token_type"], "B,T,H")
    table.row("embeddings.position_embeddings.weight[positions]", e["position"], "B,T,H")
    table.row("sum of the three", e["sum"], "B,T,H")
    table.row("embeddings.LayerNorm(sum)  (dropout: eval)", x, "B,T,H",
              _same("hidden_states[0]", x, output.hidden_states[0], tol, checks))

    # The additive mask: 0 where attended, finfo(dtype).min where masked (docs/encoder.md).
    mask = (1.0 - attention_mask[:, None, None, :].astype(dtype)) * np.finfo(dtype).min   # (B, 1, 1, T)
    D = c.hidden_size // c.num_attention_heads
    for i in range(c.num_hidden_layers):
        table.section(f"encoder.layer.{i}.*  (BertLayer, docs/attention.md, docs/feed_forward.md)")
        x, _, cache = reference.bert_layer_forward(p, c, i, x, mask)
        a = cache["acts"]
        scores = a["query"] @ a["key"].transpose(0, 1, 3, 2) * dtype(D ** -0.5) + mask   # (B, N, F, T), for display
        table.row("attention.self.query(x)      -> Q", a["query"], "B,N,F,D")
        table.row("attention.self.key(x)        -> K", a["key"], "B,N,T,D")
        table.row("attention.self.value(x)      -> V", a["value"], "B,N,T,D")
        table.row("scores = Q K^T / sqrt(D) + mask", scores, "B,N,F,T")
        table.row("probs = softmax(scores)", a["probs"], "B,N,F,T",
                  _same(f"attentions[{i}]", a["probs"], output.attentions[i], tol, checks))
        table.row("context = probs V, heads merged", a["context"], "B,F,H")
        table.row("attention.output.dense(context)", a["attention_dense"], "B,T,H")
        table.row("attention.output.LayerNorm(dense + x)", a["attention_output"], "B,T,H")
        table.row("intermediate.dense(attention_output)", a["intermediate_dense"], "B,T,I")
        table.row(f"{c.hidden_act}(...)       -> intermediate", a["intermediate"], "B,T,I")
        table.row("output.dense(intermediate)", a["output_dense"], "B,T,H")
        table.row("output.LayerNorm(dense + attention_output)", x, "B,T,H",
                  _same(f"hidden_states[{i + 1}]", x, output.hidden_states[i + 1], tol, checks))

    # BertPooler: tanh(dense(last_hidden_state[:, 0]))
    table.section("pooler.*  (BertPooler, docs/encoder.md)")
    pooled, cache = reference.pooler_forward(p, x)                                                 # (B, H)
    acts = cache[-1]
    table.row("last_hidden_state[:, 0]  ([CLS])", acts["first"], "B,H")
    table.row("pooler.dense(...)", acts["dense"], "B,H")
    table.row("tanh(...)  -> pooler_output", pooled, "B,H",
              _same("pooler_output", pooled, output.pooler_output, tol, checks))
    return output


# ---- the gradient check ----------------------------------------------------------------------

def _checked_names(model, params):
    """Every parameter of a small model.  Of a large one: the embeddings, the first layer and the
    pooler (and a task head's own parameters).  Their gradients pass through every layer's backward
    on the way down, so a mistake anywhere above shows up in them."""
    names = list(params)
    if len(names) <= FULL_CHECK_MAX:
        return names
    head = any(n.startswith("bert.") for n in names)         # a task head: BERT's names under "bert."
    return [n for n in names if (head and not n.startswith("bert."))
            or n.removeprefix("bert.").startswith(("embeddings.", "encoder.layer.0.", "pooler."))]


def _sample_entries(g, rng):
    """Flat indices of a few entries of g: the largest |g| and some at random."""
    top, n_random = ENTRIES
    rows = g.reshape(-1, g.shape[-1])                                       # (R, C)
    # The k largest |g| lie in the k rows with the largest max |g|: look only there, which spares
    # an argsort of a whole (V, H) embedding gradient.
    row_max = np.maximum(rows.max(axis=1), -rows.min(axis=1))               # (R,)
    k = min(top, row_max.size)
    best_rows = np.argpartition(row_max, row_max.size - k)[row_max.size - k:]
    candidates = (best_rows[:, None] * rows.shape[1] + np.arange(rows.shape[1])).ravel()
    chosen = candidates[np.argsort(np.abs(g.ravel()[candidates]))[::-1][:top]]
    random = rng.choice(g.size, size=min(n_random, g.size), replace=False)
    return np.unique(np.concatenate([chosen, random]))


def upstream_gradients(rng, B, T, H):
    """The upstream gradients of the check's loss (also the page of `explain --html`)."""
    u = rng.standard_normal((B, H))                    # upstream gradient of pooler_output      (B, H)
    w = rng.standard_normal((B, T, H))                 # upstream gradient of last_hidden_state  (B, T, H)
    return u, w


def gradient_check(model, ids, attention_mask, seed, out, checks, token_type_ids=None, upstream=None, labels=None,
                   symbols=None):
    """model.backward(...) vs centred finite differences, float64, of
      - labels given ({label argument: array}): the model's own loss, model(..., **labels).loss;
      - else sum over the outputs named in `upstream` ({output name: upstream gradient}) of
        sum(output * upstream); default: pooler_output=u, last_hidden_state=w drawn from the seed.
    symbols: {output name: the letter printed for its upstream gradient}."""
    rng = np.random.default_rng(seed)
    B, T = ids.shape
    u, w = upstream_gradients(rng, B, T, model.config.hidden_size)
    if upstream is None and labels is None:
        upstream = {"pooler_output": u, "last_hidden_state": w}
    symbols = {"pooler_output": "u", "last_hidden_state": "w", **(symbols or {})}

    def loss(**inputs):                                # loss = sum over the outputs of sum(output * upstream)
        o = model(attention_mask=attention_mask, token_type_ids=token_type_ids, **inputs, **(labels or {}))
        if labels is not None:
            return float(o.loss)
        return float(sum(np.sum(o[name] * g) for name, g in upstream.items()))

    base = loss(input_ids=ids)
    grads = model.backward() if labels is not None else model.backward(**upstream)
    dembeds = model.inputs_embeds_grad                                      # (B, T, H)
    params = model.state_dict()
    expected = [n for n, _ in model.named_parameters()]                     # a tied weight once
    shapes_ok = checks.add("gradient keys and shapes",
                           list(grads) == expected and all(grads[n].shape == params[n].shape for n in expected))
    call = ("" if labels is not None else ", ".join(f"{name}={symbols.get(name, name)}" for name in upstream))
    print(f"  grads = model.backward({call}): {len(grads)} tensors, keys "
          f"{'=' if list(grads) == expected else '!='} named_parameters(), shapes "
          f"{'all match' if shapes_ok else 'DIFFER'}", file=out)
    print(f"  d loss / d inputs_embeds = model.inputs_embeds_grad, shape {tuple(dembeds.shape)}", file=out)
    print(f"  finite differences: (loss(p + eps v) - loss(p - eps v)) / (2 eps) against sum(grad * v), "
          f"eps = {EPS:g};", file=out)
    print(f"  v = sign(grad) on {sum(ENTRIES)} entries per tensor (the {ENTRIES[0]} largest |grad|, "
          f"{ENTRIES[1]} at random); rel_error as npbert.gradcheck, tolerance {REL_TOL:g}", file=out)
    params = {n: params[n] for n in expected}
    names = _checked_names(model, params)
    if len(names) < len(params):
        print(f"  checked: the embeddings, encoder.layer.0 and the pooler ({len(names)} of {len(params)} tensors; "
              "their gradients pass through every layer above)", file=out)
    print(f"\n  {'tensor':<49} {'shape':<13} {'max|grad|':>10} {'analytic':>14} {'numeric':>14} "
          f"{'rel_error':>10}", file=out)

    def directional(x, g, run):
        """The derivative of the loss along v = sign(g) on a few sampled entries of x (+1 where g
        is 0), so that sum(g * v) = sum |g| there has no cancellation.  x is perturbed in place
        and restored exactly."""
        idx = _sample_entries(g, rng)
        v = np.where(g.ravel()[idx] < 0, -1.0, 1.0)
        old = x.ravel()[idx].copy()
        x.flat[idx] = old + EPS * v
        plus = run()
        x.flat[idx] = old - EPS * v
        minus = run()
        x.flat[idx] = old
        return float(np.sum(g.ravel()[idx] * v)), (plus - minus) / (2 * EPS)

    floored = []

    def report(name, shape, g, analytic, numeric, zero_expected=False):
        shape = str(tuple(shape))
        if zero_expected:
            # The true gradient is 0 (docs/backward.md): both numbers are round-off.  The loss carries
            # ~1e-16 |loss| of it; the difference quotient divides that by EPS (with a wide margin).
            ok = checks.add(name, abs(analytic) < 1e-12 and abs(numeric) < 1e-11 * max(1.0, abs(base)) / EPS)
            verdict = f"{'0 (*)':>10}{'' if ok else '  FAIL'}"             # in the rel_error column
        else:
            # rel_error < REL_TOL, or a difference within the round-off of the difference quotient
            # itself (a loss carries ~1e-15 |loss| of it, divided by EPS): a gradient of ~1e-5 of a loss of
            # ~1 (a head's mean cross-entropy, deep in the encoder) cannot be checked more finely than that.
            err = rel_error(analytic, numeric)
            floor = abs(analytic - numeric) < ROUNDOFF * max(1.0, abs(base)) / EPS
            ok = checks.add(name, err < REL_TOL or floor)
            floored.append(floor and err >= REL_TOL)
            verdict = f"{err:>10.1e}{' (+)' if floor and err >= REL_TOL else ''}{'' if ok else '  FAIL'}"
        print(f"  {name:<49} {shape:<13} {np.max(np.abs(g)):>10.2e} {analytic:>14.6e} {numeric:>14.6e} "
              f"{verdict}", file=out)

    # The input embeddings: the forward with inputs_embeds = word_embeddings[ids] is the same function.
    word = next(n for n in params if n.endswith("embeddings.word_embeddings.weight"))
    embeds = params[word][ids].copy()                                       # (B, T, H)
    a, n = directional(embeds, dembeds, lambda: loss(inputs_embeds=embeds))
    report("inputs_embeds  (model.inputs_embeds_grad)", embeds.shape, dembeds, a, n)
    for name in names:
        a, n = directional(params[name], grads[name], lambda: loss(input_ids=ids))
        unused = upstream is not None and "pooler_output" not in upstream and ".pooler." in f".{name}"
        report(name, params[name].shape, grads[name], a, n,
               zero_expected=name.endswith("attention.self.key.bias") or unused)
    print("  (*) 0 expected: a key bias adds the same amount to every score of a softmax row, which softmax\n"
          "      ignores: its true gradient is 0 and both numbers are round-off (docs/backward.md, \"Why the key bias gets a zero gradient\")",
          file=out)
    if any(floored):
        print("  (+) rel_error above the tolerance, but |analytic - numeric| below the difference quotient's own\n"
              f"      round-off, {ROUNDOFF:g} max(1, |loss|) / eps: the gradient is too small to check more finely",
              file=out)
    if upstream is not None and "pooler_output" not in upstream and any(".pooler." in f".{n}" for n in names):
        print("  (*) and the pooler's parameters: the loss does not read pooler_output, so their true gradient is 0",
              file=out)
    return len(names) + 1
