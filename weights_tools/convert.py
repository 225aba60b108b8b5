"""Convert a BERT checkpoint between formats.

    python -m weights_tools.convert SRC DST [--to safetensors|h5|transformers]

SRC is anything npbert reads (model.safetensors, pytorch_model.bin in either
torch layout, tf_model.h5, Google's bert_model.ckpt, npbert .h5, or a
directory holding one).  DST is

* ``*.safetensors``: one safetensors file (keys as read, transformers names);
* ``*.h5``: npbert's own .h5, with the config stored inside;
* a directory (``--to transformers``): ``model.safetensors`` + ``config.json``
  that transformers' ``from_pretrained`` loads (legacy gamma/beta renamed,
  buffers dropped, Google's bert_config.json turned into a config.json).
"""

import os
import sys

if __package__ in (None, ""):
    # Run as `python weights_tools/convert.py`: Python put this folder first on
    # sys.path, where this file would shadow the standard library's `convert`
    # module; put the repository root there instead.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

import argparse
import json
import time


from npbert import io  # noqa: E402
from npbert.io.names import fix_legacy_name  # noqa: E402
from weights_tools._common import Progress, ToolError, fail, find_config  # noqa: E402

PROG = "python -m weights_tools.convert"


def guess_architecture(keys):
    """The transformers class a set of keys most likely came from."""
    keys = set(keys)
    has_mlm = any(k.startswith("cls.predictions.") for k in keys)
    has_nsp = any(k.startswith("cls.seq_relationship.") for k in keys)
    if has_mlm and has_nsp:
        return "BertForPreTraining"
    if has_mlm:
        return "BertForMaskedLM"
    if has_nsp:
        return "BertForNextSentencePrediction"
    if "qa_outputs.weight" in keys:
        return "BertForQuestionAnswering"
    if "classifier.weight" in keys:
        return "BertForSequenceClassification"
    return "BertModel"


def transformers_config(config, keys):
    """A config.json transformers accepts (Google's bert_config.json has the
    same field names, only model_type and architectures are missing)."""
    config = dict(config)
    config.setdefault("model_type", "bert")
    config.setdefault("architectures", [guess_architecture(keys)])
    return config


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Examples:\n"
               f"  {PROG} chinese_L-12_H-768_A-12/ out_dir/ --to transformers\n"
               f"  {PROG} pytorch_model.bin model.safetensors\n"
               f"  {PROG} model.safetensors model.h5 --dtype float64",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="weights file, TF checkpoint prefix, or checkpoint directory")
    parser.add_argument("dst", help="output: *.safetensors, *.h5, or a directory")
    parser.add_argument("--to", choices=["safetensors", "h5", "transformers"],
                        help="output kind (default: from DST's extension; a directory means "
                             "transformers)")
    parser.add_argument("--dtype", choices=["keep", "float16", "float32", "float64"],
                        default="keep", help="cast floating-point tensors (default: keep)")
    parser.add_argument("--config", help="config JSON to use instead of the one beside SRC")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show progress on stderr (default: for inputs over 50 MB on a "
                             "terminal)")
    return parser


def output_kind(dst, to):
    if to:
        return to
    if dst.endswith(".safetensors"):
        return "safetensors"
    if dst.endswith(".h5"):
        return "h5"
    if os.path.isdir(dst) or not os.path.splitext(dst)[1]:
        return "transformers"
    raise ToolError(f"cannot tell the output format of {dst!r}: use a .safetensors or .h5 "
                    "name, a directory, or --to")


def refuse_overwriting(src, dst, kind, weights_file, config_file):
    """DST must not be SRC, the weights or config read, nor lie inside a SRC directory
    (npbert/cli/outputs.py, the check every npbert command makes): a ToolError before any work."""
    from npbert.cli.common import UsageError
    from npbert.cli.outputs import refuse_overwriting_inputs
    import glob
    output = ("DST", dst, ("model.safetensors", "config.json")) if kind == "transformers" else ("DST", dst)
    shards = glob.glob(weights_file[:-len(".index")] + ".data-*") if weights_file.endswith(".index") else []
    try:
        refuse_overwriting_inputs([output], [("SRC", src), ("SRC", weights_file), ("the config", config_file)]
                                  + [("SRC", shard) for shard in shards])
    except UsageError as e:
        raise ToolError(str(e)) from None


def convert(src, dst, to=None, dtype="keep", config_path=None, progress=None):
    """Do the conversion; returns a one-line summary.  Raises ToolError or
    CheckpointError on bad input."""
    kind = output_kind(dst, to)
    weights_file = io.find_weights_file(src)
    fmt = io.detect_format(weights_file)
    config, config_file = find_config(weights_file, config_path)
    refuse_overwriting(src, dst, kind, weights_file, config_file)
    start = time.perf_counter()
    tensors = io.read_state_dict(weights_file)
    if dtype != "keep":
        tensors = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in tensors.items()}
    total = sum(v.nbytes for v in tensors.values())
    if progress is None:
        progress = total > 50e6 and sys.stderr.isatty()
    show = Progress(f"writing {os.path.basename(os.path.normpath(dst))}", progress)

    if kind == "transformers":
        if os.path.isfile(dst):
            raise ToolError(f"{dst} is a file; --to transformers writes a directory")
        if config is None:
            raise ToolError(f"no config.json or bert_config.json beside {weights_file}: "
                            "pass --config")
        # transformers-loadable: canonical names, no buffers.
        tensors = {fix_legacy_name(k): v for k, v in tensors.items()
                   if not k.endswith("position_ids")}
        os.makedirs(dst, exist_ok=True)
        io.write_safetensors(os.path.join(dst, "model.safetensors"), tensors,
                             {"format": "pt"}, progress=show)
        from npbert.io._atomic import atomic_write
        with atomic_write(os.path.join(dst, "config.json"), "w") as f:
            json.dump(transformers_config(config, tensors), f, indent=2, sort_keys=True)
            f.write("\n")
        out = os.path.join(dst, "model.safetensors")
    elif kind == "safetensors":
        io.write_safetensors(dst, tensors, {"format": "pt"}, progress=show)
        out = dst
    else:
        if config is None:
            print(f"{PROG}: warning: no config found for {weights_file}; the .h5 stores an "
                  "empty config", file=sys.stderr)
        io.write_npbert_h5(dst, tensors, config or {}, progress=show)
        out = dst
    seconds = time.perf_counter() - start
    return (f"{weights_file} ({fmt}) -> {out} ({kind}): {len(tensors)} tensors, "
            f"{total / 1e6:.1f} MB in {seconds:.2f} s")


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        print(convert(args.src, args.dst, args.to, args.dtype, args.config, args.progress))
    except (ToolError, io.CheckpointError) as e:
        return fail(PROG, str(e))
    except OSError as e:
        return fail(PROG, f"{e.filename or ''}: {e.strerror or e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
