"""Inspect a BERT checkpoint without loading a model.

    python -m weights_tools.inspect PATH [--class BertForSequenceClassification]

Prints the detected format and key convention, every tensor (name, dtype,
shape, bytes), parameter counts per module (buffers and the tied decoder
weight not counted, as transformers counts), and with --class what loading
into that npbert class would leave missing (fresh), ignore or reject.
"""

import os
import sys

if __package__ in (None, ""):
    # Run as `python weights_tools/inspect.py`: Python put this folder first on
    # sys.path, where this file would shadow the standard library's `inspect`
    # module; put the repository root there instead.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

import argparse
import json
from collections import OrderedDict

import numpy as np  # noqa: E402

from npbert import io  # noqa: E402
from weights_tools._common import (ToolError, canonical_name, expected_for_class, fail,  # noqa: E402
                                   find_config, is_counted, key_convention, module_of)

PROG = "python -m weights_tools.inspect"


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Example:\n"
               f"  {PROG} bert-base-uncased/ --class BertForSequenceClassification",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="weights file, TF checkpoint prefix, or checkpoint directory")
    parser.add_argument("--class", dest="class_name", metavar="CLASS",
                        help="an npbert model class (BertModel, BertForMaskedLM, ...): report "
                             "what a load into it would miss, ignore or reject")
    parser.add_argument("--config", help="config JSON (default: the one beside the weights)")
    parser.add_argument("--no-tensors", action="store_true", help="omit the per-tensor table")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def parameter_counts(tensors):
    """OrderedDict module -> count, plus the total and the base model's total."""
    counts = OrderedDict()
    keys = set(tensors)
    for key, array in tensors.items():
        if not is_counted(key, keys):
            continue
        module = module_of(canonical_name(key))
        counts[module] = counts.get(module, 0) + int(np.prod(array.shape, dtype=np.int64))
    total = sum(counts.values())
    base = sum(v for k, v in counts.items() if k.startswith("bert."))
    return counts, total, base


def inspect(path, class_name=None, config_path=None):
    """Everything the command prints, as a dict."""
    weights_file = io.find_weights_file(path)
    fmt = io.detect_format(weights_file)
    tensors = io.read_state_dict(weights_file)
    counts, total, base = parameter_counts(tensors)
    report = {
        "file": weights_file,
        "format": fmt,
        "key_convention": key_convention(fmt, list(tensors)),
        "tensors": [{"name": k, "dtype": str(v.dtype), "shape": list(v.shape),
                     "bytes": int(v.nbytes)} for k, v in tensors.items()],
        "total_bytes": int(sum(v.nbytes for v in tensors.values())),
        "parameters_per_module": counts,
        "parameters_total": total,
        "parameters_base_model": base,
    }
    if class_name:
        config, config_file = find_config(weights_file, config_path)
        expected, prefix = expected_for_class(class_name, config)
        result = io.match_state_dict(tensors, expected, base_model_prefix=prefix)
        report["load_into"] = {
            "class": class_name,
            "config": config_file,
            "missing": result.missing,
            "unexpected": result.unexpected,
            "mismatched": [[k, list(c), list(e)] for k, c, e in result.mismatched],
            "ignored": result.ignored,
            "renamed": len(result.renamed),
        }
    return report


def render(report, show_tensors=True):
    lines = [f"file:     {report['file']}",
             f"format:   {report['format']}",
             f"keys:     {report['key_convention']}",
             f"tensors:  {len(report['tensors'])} ({report['total_bytes'] / 1e6:.1f} MB)"]
    if show_tensors:
        width = max([len(t["name"]) for t in report["tensors"]] + [4])
        lines.append("")
        lines.append(f"{'name':<{width}}  {'dtype':<8} {'shape':<16} {'bytes':>12}")
        for t in report["tensors"]:
            shape = "(" + ", ".join(map(str, t["shape"])) + ")"
            lines.append(f"{t['name']:<{width}}  {t['dtype']:<8} {shape:<16} {t['bytes']:>12,}")
    lines.append("")
    lines.append("parameters per module:")
    for module, n in report["parameters_per_module"].items():
        lines.append(f"  {module:<32} {n:>14,}")
    lines.append(f"  {'total':<32} {report['parameters_total']:>14,}")
    lines.append(f"  {'BertModel part (bert.*)':<32} {report['parameters_base_model']:>14,}")
    load = report.get("load_into")
    if load:
        lines.append("")
        lines.append(f"load into {load['class']} (config {load['config']}):")

        def listing(title, items):
            lines.append(f"  {title} ({len(items)}):" + ("" if items else " none"))
            lines.extend(f"    {item}" for item in items)
        listing("missing from the checkpoint (task heads start fresh; others are errors)",
                load["missing"])
        listing("in the checkpoint but unused", load["unexpected"])
        listing("shape does not fit", [f"{k}: checkpoint {tuple(c)}, model {tuple(e)}"
                                       for k, c, e in load["mismatched"]])
        listing("dropped on purpose (buffers, tied copies)", load["ignored"])
        lines.append(f"  renamed on load (prefix, gamma/beta, aliases): {load['renamed']}")
    return "\n".join(lines)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        report = inspect(args.path, args.class_name, args.config)
    except (ToolError, io.CheckpointError) as e:
        return fail(PROG, str(e))
    except OSError as e:
        return fail(PROG, f"{e.filename or ''}: {e.strerror or e}")
    if args.json:
        if args.no_tensors:
            report.pop("tensors")
        print(json.dumps(report, indent=1))
    else:
        print(render(report, show_tensors=not args.no_tensors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
