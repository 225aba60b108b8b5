"""`npbert fill-mask`: the most likely tokens for [MASK], as transformers' fill-mask pipeline
(npbert.pipeline("fill-mask")).  A checkpoint whose masked-LM head is not in its weights (a
BertModel such as all-MiniLM-L6-v2, a fine-tuned classifier) is refused: its head would be
random, and so would its answers."""
import json
import sys

import npbert
from npbert.cli.common import CliError, load_checkpoint, load_tokenizer, positive_int

MLM_HEAD = "cls.predictions."


def add_parser(commands):
    p = commands.add_parser("fill-mask", help="predict the [MASK] token(s) of a text",
                            description="Print the top-k fillers of each [MASK] with the pipeline's fields "
                                        "(score, token, token_str, sequence). The checkpoint must hold a trained "
                                        "masked-LM head (BertForMaskedLM or BertForPreTraining, e.g. "
                                        "`npbert pretrain`'s or the demo's model).")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a checkpoint directory with a masked-LM head (cls.predictions.*) and vocab.txt")
    p.add_argument("text", nargs="+", help="texts holding [MASK] (quote each text)")
    p.add_argument("--top_k", type=positive_int, default=5, help="candidates shown per mask")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(run=run)


def load_mlm(path, flag="--model"):
    """(BertForMaskedLM, tokenizer) of a checkpoint that has a trained masked-LM head; the
    loading notes (e.g. the unused NSP head of a pre-training checkpoint) go to stderr."""
    model = load_checkpoint(npbert.BertForMaskedLM, path, flag, require_trained=MLM_HEAD,
                            what="masked-LM head (cls.predictions.*)")
    return model, load_tokenizer(path, flag)


def run(args):
    model, tokenizer = load_mlm(args.model)
    fill = npbert.pipeline("fill-mask", model=model, tokenizer=tokenizer)
    out = []
    for text in args.text:
        try:
            result = fill(text, top_k=args.top_k)
        except ValueError as e:
            raise CliError(f"{text!r}: {e}") from None
        out.append(result)
        if not args.json:
            print(text)
            groups = result if result and isinstance(result[0], list) else [result]
            for k, group in enumerate(groups):
                if len(groups) > 1:
                    print(f"  mask {k + 1} (each mask scored alone):")
                for r in group:
                    print(f"  {r['score']:.4f}  {r['token_str']:<15s} {r['sequence']}")
    if args.json:
        print(json.dumps(out if len(out) > 1 else out[0], indent=2, ensure_ascii=False))
    sys.stdout.flush()
    return 0
