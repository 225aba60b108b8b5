"""`npbert fill-mask`: the most likely tokens for [MASK], as transformers' fill-mask pipeline."""
import json
import os
import warnings

from npbert.cli.common import CliError, positive_int


def add_parser(commands):
    p = commands.add_parser("fill-mask", help="predict the [MASK] token(s) of a text",
                            description="Print the top-k fillers of each [MASK] with the pipeline's fields "
                                        "(score, token, token_str, sequence).")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint with an MLM head and vocab.txt")
    p.add_argument("text", nargs="+", help="texts with [MASK]")
    p.add_argument("--top_k", type=positive_int, default=5)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(run=run)


def load_mlm(path):
    import npbert
    if not os.path.isdir(path):
        raise CliError(f"--model {path}: not a directory")
    try:
        tokenizer = npbert.BertTokenizer.from_pretrained(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # the NSP head of a pre-training checkpoint is not used
            model = npbert.BertForMaskedLM.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise CliError(f"--model {path}: {e}") from None
    return model, tokenizer


def run(args):
    from npbert.data.pretrain import fill_mask
    model, tokenizer = load_mlm(args.model)
    out = []
    for text in args.text:
        try:
            result = fill_mask(model, tokenizer, text, args.top_k)
        except ValueError as e:
            raise CliError(str(e)) from None
        out.append(result)
        if not args.json:
            print(text)
            groups = result if result and isinstance(result[0], list) else [result]
            for group in groups:
                for r in group:
                    print(f"  {r['score']:.4f}  {r['token_str']:<15s} {r['sequence']}")
    if args.json:
        print(json.dumps(out if len(out) > 1 else out[0], indent=2, ensure_ascii=False))
    return 0
