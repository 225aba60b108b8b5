"""`npbert embed`: sentence embeddings (mean pooling + L2 normalisation, the all-MiniLM-L6-v2 recipe)
of texts, printed as a cosine-similarity matrix or as the vectors."""
import json
import os
import warnings

from npbert.cli.common import CliError


def add_parser(commands):
    p = commands.add_parser("embed", help="sentence embeddings of texts and their cosine similarities",
                            description="Mean-pool the model's token vectors over the attention mask and "
                                        "L2-normalise (Sentence-BERT's recipe, as sentence-transformers computes "
                                        "it for all-MiniLM-L6-v2); print the cosine-similarity matrix.")
    p.add_argument("--model", required=True, metavar="DIR")
    p.add_argument("texts", nargs="+")
    p.add_argument("--vectors", action="store_true", help="print the embeddings as JSON instead")
    p.add_argument("--no_normalize", action="store_true", help="the mean-pooled vectors, not unit length")
    p.set_defaults(run=run)


def run(args):
    import numpy as np

    import npbert
    from npbert.modeling.sentence import encode
    if not os.path.isdir(args.model):
        raise CliError(f"--model {args.model}: not a directory")
    try:
        tokenizer = npbert.BertTokenizer.from_pretrained(args.model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = npbert.BertModel.from_pretrained(args.model)
    except (OSError, ValueError, KeyError) as e:
        raise CliError(f"--model {args.model}: {e}") from None
    e = encode(model, tokenizer, args.texts, normalize=not args.no_normalize)
    if args.vectors:
        print(json.dumps([[round(float(x), 6) for x in row] for row in e]))
        return 0
    u = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    sim = u @ u.T
    width = max(len(t) for t in args.texts[:20])
    print("cosine similarity")
    for i, t in enumerate(args.texts):
        print(f"  [{i}] {t}")
    print("      " + " ".join(f"[{j}]".rjust(6) for j in range(len(args.texts))))
    for i in range(len(args.texts)):
        print(f"  [{i}] " + " ".join(f"{sim[i, j]:6.3f}" for j in range(len(args.texts))))
    return 0
