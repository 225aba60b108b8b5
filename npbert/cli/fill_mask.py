"""`npbert fill-mask`: the most likely tokens for a [MASK], as transformers' fill-mask pipeline.

    npbert fill-mask --model DIR "The capital of France is [MASK]." [--top_k 5] [--json]
"""
from npbert.cli.common import CliError


def add_parser(subparsers):
    p = subparsers.add_parser("fill-mask", help="predict the [MASK] of a text with a pre-trained model",
                              description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", required=True, help="a model directory (config.json, weights, vocab.txt)")
    p.add_argument("text", help='a text with [MASK], e.g. "to be or not to [MASK]"')
    p.add_argument("--top_k", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print the pipeline's list of dicts as JSON")
    p.set_defaults(run=run)
    return p


def load_masked_lm(path):
    """(model, tokenizer) from a directory: BertForPreTraining when it has the NSP head, else BertForMaskedLM."""
    from npbert.modeling import BertForMaskedLM, BertForPreTraining
    from npbert.tokenization import BertTokenizer
    import os
    if not os.path.isdir(path):
        raise CliError(f"--model {path}: not a directory")
    try:
        tokenizer = BertTokenizer.from_pretrained(path)
        config_text = open(os.path.join(path, "config.json")).read()
        cls = BertForPreTraining if "BertForPreTraining" in config_text else BertForMaskedLM
        model = cls.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise CliError(f"--model {path}: {e}") from None
    return model, tokenizer


def run(args):
    import json
    from npbert.data.fill_mask import fill_mask
    model, tokenizer = load_masked_lm(args.model)
    try:
        results = fill_mask(model, tokenizer, args.text, top_k=args.top_k)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for one in results if isinstance(results[0], list) else [results]:
        for r in one:
            print(f"{r['score']:.4f}  {r['token_str']:<15} {r['sequence']}")
        print()
    return 0
