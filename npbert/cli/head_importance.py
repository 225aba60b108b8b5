"""`npbert head-importance`: which attention heads a fine-tuned classifier needs (Michel et al. 2019).

    npbert head-importance --model DIR --validation_file dev.csv [--output_dir DIR]

Runs npbert.interpret.head_importance over the labelled file (.csv/.tsv/.json/.jsonl, the columns
found as `npbert finetune` finds them), then masks the heads least important first and evaluates
at each step (the pruning curve).  Writes head_importance.json (importance, raw scores, attention
entropy, the masking order, the curve) and, with matplotlib, head_importance.png and
pruning_curve.png to --output_dir.  Progress on stderr.
"""
import json
import os
import sys

import numpy as np

import npbert.interpret as ni
from npbert.cli.attribute import load_model, progress_printer
from npbert.cli.common import CliError, UsageError, non_negative_int, positive_int
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.io._atomic import atomic_write
from npbert.tasks.readers import find_columns, read_table
from npbert.training import DataCollatorWithPadding

# What the command writes into --output_dir (cli/outputs.py refuses an input among them).
WRITES = ("head_importance.json", "head_importance.png", "pruning_curve.png")


def add_parser(commands):
    p = commands.add_parser("head-importance", help="rank a classifier's attention heads by importance and draw "
                                                    "the pruning curve", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, metavar="DIR", help="a fine-tuned BertForSequenceClassification")
    p.add_argument("--validation_file", required=True, help="labelled examples (.csv, .tsv, .json, .jsonl)")
    p.add_argument("--text_column_name", help="the column holding the text (default: found by name, as finetune)")
    p.add_argument("--text_pair_column_name", help="the column holding the second text of a pair")
    p.add_argument("--label_column_name", help="the column holding the label")
    p.add_argument("--max_seq_length", type=positive_int, default=None,
                   help="tokens per example, [CLS] and [SEP] included (default: 128, or the model's "
                        "max_position_embeddings if smaller)")
    p.add_argument("--per_device_eval_batch_size", type=positive_int, default=16, help="examples per forward")
    p.add_argument("--max_examples", type=positive_int, default=None, help="use only the first N examples")
    p.add_argument("--granularity", choices=("batch", "token"), default="batch",
                   help="|dL/dxi| of each batch (bertology) or of each token (Michel et al.'s code)")
    p.add_argument("--dont_normalize_importance_by_layer", action="store_true",
                   help="keep the raw scores (bertology normalises each layer's by its L2 norm)")
    p.add_argument("--normalize_global_importance", action="store_true", help="min-max scale over all heads")
    p.add_argument("--pruning_points", type=non_negative_int, default=11,
                   help="points on the pruning curve, 0 for none (default 11: 0%%, 10%%, ..., 100%% masked)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="the dtype the model runs in")
    p.add_argument("--output_dir", default=".", help="where the json and pictures go (default: here)")
    p.set_defaults(run=run)


def load_batches(args, model, tokenizer):
    """The validation file as padded batches with labels (ids from config.label2id, or indices)."""
    if not os.path.isfile(args.validation_file):
        raise UsageError(f"--validation_file {args.validation_file}: no such file")
    try:
        rows = read_table(args.validation_file)
    except (OSError, ValueError) as e:
        raise CliError(f"--validation_file {args.validation_file}: {e}") from None
    if not rows:
        raise CliError(f"--validation_file {args.validation_file}: no examples")
    try:
        text_col, pair_col, label_col = find_columns(args.validation_file, rows, args.text_column_name,
                                                     args.text_pair_column_name, args.label_column_name)
    except ValueError as e:
        raise CliError(str(e)) from None
    label2id = {str(v): k for k, v in model.config.id2label.items()}
    K = model.config.num_labels
    examples = []
    for line, row in rows[:args.max_examples]:
        value = str(row[label_col])
        label = label2id.get(value, int(value) if value.lstrip("-").isdigit() else None)
        if label is None or not 0 <= label < K:
            raise CliError(f"{args.validation_file}:{line}: label {row[label_col]!r} is not one of the model's "
                           f"({', '.join(label2id)})")
        enc = tokenizer(row[text_col], row[pair_col] if pair_col else None, truncation=True,
                        max_length=args.max_seq_length, return_token_type_ids=True)
        examples.append({k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")} | {"labels": label})
    collate = DataCollatorWithPadding(tokenizer)
    size = args.per_device_eval_batch_size
    batches = [collate(examples[i:i + size]) for i in range(0, len(examples), size)]
    for b in batches:
        b["labels"] = np.asarray(b["labels"], dtype=np.int64)
    return batches, len(examples)


def run(args):
    refuse_overwriting_inputs([("--output_dir", args.output_dir, WRITES)],
                              [("--model", args.model), ("--validation_file", args.validation_file)])
    model, tokenizer = load_model(args)
    probe = {"input_ids": np.zeros((1, 1), np.int64), "labels": np.zeros(1, np.int64)}
    if model.attribution_targets != {"class": "logits"} or model.regroup_kind(probe) != "class":
        # (the model's declarations: a classifier of its logits whose loss is a mean over labelled examples,
        # which is what this command's labelled text file gives it)
        raise UsageError(f"--model {args.model}: head-importance needs a BertForSequenceClassification checkpoint, "
                         f"this one is {type(model).__name__}")
    batches, n = load_batches(args, model, tokenizer)
    print(f"head importance of {model.config.num_hidden_layers} x {model.config.num_attention_heads} heads over "
          f"{n} examples ({len(batches)} batches)", file=sys.stderr)
    importance = ni.head_importance(model, batches,
                                    normalize_importance_by_layer=not args.dont_normalize_importance_by_layer,
                                    normalize_global_importance=args.normalize_global_importance,
                                    granularity=args.granularity, progress=progress_printer("batch"))
    result = {"importance": importance.importance.tolist(), "raw": importance.raw.tolist(),
              "entropy": importance.entropy.tolist(), "tokens": importance.tokens,
              "granularity": importance.granularity, "order": importance.order()}
    curve = None
    if args.pruning_points:
        if args.pruning_points < 2:
            raise UsageError("--pruning_points: give 0 (no curve) or at least 2")
        curve = ni.pruning_curve(model, batches, importance, points=args.pruning_points,
                                 progress=progress_printer("pruning point"))
        result["pruning_curve"] = {"masked": curve.masked, "loss": curve.loss, "accuracy": curve.accuracy}
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "head_importance.json")
    with atomic_write(path, "w") as f:
        json.dump(result, f, indent=1)
    print(np.array2string(importance.importance, precision=3, max_line_width=200))
    if curve is not None:
        for k, loss, acc in zip(curve.masked, curve.loss, curve.accuracy or [None] * len(curve.loss)):
            print(f"{k:4d} heads masked: loss {loss:.4f}" + ("" if acc is None else f", accuracy {acc:.4f}"))
    written = [path]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("note: pictures need matplotlib (pip install npbert[plot])", file=sys.stderr)
    else:
        written.append(ni.head_importance_png(importance.importance, os.path.join(args.output_dir,
                                                                                  "head_importance.png")))
        if curve is not None:
            written.append(ni.pruning_curve_png(curve, os.path.join(args.output_dir, "pruning_curve.png")))
    print("wrote " + ", ".join(written))
    return 0
