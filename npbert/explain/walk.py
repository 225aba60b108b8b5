"""The text walk (`npbert explain`): one sentence through a BertModel, every activation of the
forward printed as npbert/reference.py keeps it (reference.activations) and checked against the
model's own outputs, then model.backward() checked by npbert.gradcheck in float64.

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size,
    V = vocab size, P = max position embeddings, Y = type vocab size, L = layers
"""
import numpy as np

from . import stages
from .checks import Checks, compare, gradient_check, note
from .models import as_float64, describe
from .tokens import encode


class Table:
    """Rows of (name, shape, dims, summary numbers), aligned; a check goes on the line below its row."""

    HEAD = f"  {'tensor':<48} {'shape':<15} {'dims':<7} {'mean':>9} {'std':>9} {'min':>9} {'max':>9}"

    def __init__(self, out):
        self.out = out
        print(self.HEAD, file=out)

    def section(self, title):
        print(f"  -- {title} " + "-" * max(0, len(self.HEAD) - len(title) - 6), file=self.out)

    def row(self, name, x, dims, check=None):
        x64 = np.asarray(x, dtype=np.float64)
        print(f"  {name:<48} {str(tuple(x.shape)):<15} {dims:<7} {x64.mean():>9.4f} {x64.std():>9.4f} "
              f"{x64.min():>9.4f} {x64.max():>9.4f}", file=self.out)
        if check is not None:
            print(f"      {note(check)}", file=self.out)


def forward_tolerance(dtype):
    """A stage recomputed by reference.py against the model's own: the same operations summed in
    another order (the fast path), so round-off: ~1e-7 relative in float32, ~1e-15 in float64."""
    return 1e-5 if dtype == np.float32 else 1e-12


def walk_forward(bert, ids, out, checks):
    """Print every activation of reference.bert_forward on the model's arrays, checked against what
    the model itself returned.  Read along with docs/embeddings.md, docs/attention.md,
    docs/feed_forward.md, docs/encoder.md."""
    c, tol = bert.config, forward_tolerance(bert.dtype)
    types = np.zeros_like(ids)                                              # (B, T), the default
    output = bert(input_ids=ids, attention_mask=np.ones_like(ids), output_hidden_states=True, output_attentions=True)
    _, _, acts = stages.forward(bert, ids, types)
    table = Table(out)
    table.section("embeddings  (BertEmbeddings, docs/embeddings.md)")
    e = acts["embeddings"]
    table.row("embeddings.word_embeddings.weight[input_ids]", e["word"], "B,T,H")
    table.row("embeddings.token_type_embeddings.weight[types]", e["token_type"], "B,T,H")
    table.row("embeddings.position_embeddings.weight[positions]", e["position"], "B,T,H")
    table.row("sum of the three", e["sum"], "B,T,H")
    table.row("embeddings.LayerNorm(sum)  (dropout: eval)", e["embeddings"], "B,T,H",
              compare(checks, "hidden_states[0]", e["embeddings"], output.hidden_states[0], tol))
    for i, a in enumerate(acts["layers"]):
        table.section(f"encoder.layer.{i}.*  (BertLayer, docs/attention.md, docs/feed_forward.md)")
        table.row("attention.self.query(x)      -> Q", a["query"], "B,N,F,D")
        table.row("attention.self.key(x)        -> K", a["key"], "B,N,T,D")
        table.row("attention.self.value(x)      -> V", a["value"], "B,N,T,D")
        table.row("scores = Q K^T / sqrt(D) + mask", a["scores"], "B,N,F,T")
        table.row("probs = softmax(scores)", a["probs"], "B,N,F,T",
                  compare(checks, f"attentions[{i}]", a["probs"], output.attentions[i], tol))
        table.row("context = probs V, heads merged", a["context"], "B,F,H")
        table.row("attention.output.dense(context)", a["attention_dense"], "B,T,H")
        table.row("attention.output.LayerNorm(dense + x)", a["attention_output"], "B,T,H")
        table.row("intermediate.dense(attention_output)", a["intermediate_dense"], "B,T,I")
        table.row(f"{c.hidden_act}(...)       -> intermediate", a["intermediate"], "B,T,I")
        table.row("output.dense(intermediate)", a["output_dense"], "B,T,H")
        table.row("output.LayerNorm(dense + attention_output)", a["layer_output"], "B,T,H",
                  compare(checks, f"hidden_states[{i + 1}]", a["layer_output"], output.hidden_states[i + 1], tol))
    if acts["pooler"] is not None:
        table.section("pooler.*  (BertPooler, docs/encoder.md)")
        p = acts["pooler"]
        table.row("last_hidden_state[:, 0]  ([CLS])", p["first"], "B,H")
        table.row("pooler.dense(...)", p["dense"], "B,H")
        table.row("tanh(...)  -> pooler_output", p["pooled"], "B,H",
                  compare(checks, "pooler_output", p["pooled"], output.pooler_output, tol))


def upstream_gradients(rng, B, T, H):
    """The upstream gradients of the text walk's loss: u of pooler_output (B, H), w of last_hidden_state (B, T, H)."""
    return rng.standard_normal((B, H)), rng.standard_normal((B, T, H))


def explain_text(bert, tokenizer, text, out, seed=0, description=None, tokenizer_description=None):
    """`npbert explain`: the walk of `bert` (a BertModel) on `text`, printed to `out`.  Returns
    (Checks, how many tensors the gradient check compared)."""
    c = bert.config
    tokens, ids, _, cut = encode(tokenizer, text, None, c)
    B, T = ids.shape
    checks = Checks()
    print("npbert explain: one sentence through BertModel, stage by stage", file=out)
    print(f"  model    {description or describe(bert)}", file=out)
    print(f"           L={c.num_hidden_layers} layers, H={c.hidden_size}, N={c.num_attention_heads} heads, "
          f"D={c.hidden_size // c.num_attention_heads}, I={c.intermediate_size}, V={c.vocab_size}, "
          f"P={c.max_position_embeddings}, Y={c.type_vocab_size}, hidden_act={c.hidden_act}, "
          f"{bert.num_parameters():,} parameters", file=out)
    print(f"  text     {text!r}", file=out)
    print(f"  tokens   {_shorten(tokens)}", file=out)
    print(f"           ({(tokenizer_description or getattr(tokenizer, 'description', type(tokenizer).__name__)) + cut})",
          file=out)
    print(f"  ids      {_shorten(ids[0].tolist())}   B={B}, T={T}, attention_mask all 1", file=out)
    print("  dims     B batch, T tokens (keys), F tokens (queries; F = T here), H hidden, N heads, D head size,\n"
          "           I intermediate, L layers, V vocab, P positions, Y token types  (docs/index.md)", file=out)
    print(f"\nForward ({np.dtype(bert.dtype).name}, eval: dropout off).  Each tensor computed from the parameters by "
          "npbert/reference.py, checked against\nthe model's own output_hidden_states / output_attentions / "
          "pooler_output:", file=out)
    walk_forward(bert, ids, out, checks)
    print("\nBackward (float64): loss = sum(pooler_output * u) + sum(last_hidden_state * w), "
          f"u, w ~ N(0, 1) (seed {seed})", file=out)
    bert64 = as_float64(bert)
    u, w = upstream_gradients(np.random.default_rng(seed), B, T, c.hidden_size)
    upstream = {"last_hidden_state": w} if bert64.pooler is None else {"pooler_output": u, "last_hidden_state": w}
    call = ", ".join(f"{name}={'u' if name == 'pooler_output' else 'w'}" for name in upstream)
    inputs = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    n_checked = gradient_check(bert64, inputs, upstream, out, checks, seed, call)
    return checks, n_checked


def _shorten(items, limit=24):
    """'a b c ... (n more)' for a long list."""
    words = [str(x) for x in items]
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]) + f" ... ({len(words) - limit} more)"
