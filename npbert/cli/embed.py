"""`npbert embed`: sentence embeddings of texts, printed as a cosine-similarity matrix or as the
vectors.  It says what it computes: the encoder it loads, the pooling (mean over the attention
mask, the all-MiniLM-L6-v2 / Sentence-BERT recipe, or the [CLS] vector), whether the vectors are
L2-normalised, and which weights of the checkpoint (a task head) it leaves unused."""
import json
import os
import sys

import numpy as np

import npbert
from npbert.cli.common import CliError, UsageError, load_checkpoint, load_tokenizer
from npbert.modeling.sentence import encode

POOLINGS = ("mean", "cls")


def add_parser(commands):
    p = commands.add_parser("embed", help="sentence embeddings of texts and their cosine similarities",
                            description="Pool the model's token vectors into one vector per text and print the "
                                        "cosine-similarity matrix (or the vectors). Mean pooling over the attention "
                                        "mask + L2 normalisation is sentence-transformers' recipe for "
                                        "all-MiniLM-L6-v2; a sentence-transformers directory's 1_Pooling/config.json "
                                        "chooses the pooling when --pooling is not given.")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint directory with vocab.txt")
    p.add_argument("texts", nargs="+", help="the texts to embed (quote each text)")
    p.add_argument("--pooling", choices=POOLINGS, default=None,
                   help="mean: the mean of the token vectors over the attention mask; cls: the [CLS] vector "
                        "(default: the directory's 1_Pooling/config.json, else mean)")
    p.add_argument("--vectors", action="store_true", help="print the embeddings as JSON instead")
    p.add_argument("--no_normalize", action="store_true", help="the pooled vectors, not unit length")
    p.set_defaults(run=run)


def sentence_transformers_pooling(path):
    """("mean" or "cls", the file that says so) from a sentence-transformers directory, else (None, None)."""
    config = os.path.join(path, "1_Pooling", "config.json")
    if not os.path.isfile(config):
        return None, None
    try:
        with open(config, encoding="utf-8") as f:
            modes = json.load(f)
    except (OSError, ValueError) as e:
        raise CliError(f"--model {path}: {config}: {e}") from None
    if modes.get("pooling_mode_cls_token"):
        return "cls", config
    if modes.get("pooling_mode_mean_tokens"):
        return "mean", config
    raise UsageError(f"--model {path}: {config} asks for a pooling npbert embed does not compute "
                     f"({', '.join(k for k, v in modes.items() if v is True)}); use --pooling mean or cls")


def embed(model, tokenizer, texts, pooling, normalize):
    """(len(texts), H): mean-pooled (npbert.modeling.sentence.encode) or [CLS] vectors."""
    if pooling == "mean":
        return encode(model, tokenizer, texts, normalize=normalize)
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=model.config.max_position_embeddings,
                    return_tensors="np")
    with npbert.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    token_type_ids=enc["token_type_ids"])
    e = out.last_hidden_state[:, 0]                                          # (n, H): the [CLS] vectors
    if normalize:
        e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    return e


def run(args):
    model = load_checkpoint(npbert.BertModel, args.model)
    tokenizer = load_tokenizer(args.model)
    found, source = sentence_transformers_pooling(args.model)
    pooling = args.pooling or found or "mean"
    c = model.config
    why = (f"(from {source})" if source and not args.pooling else "(--pooling)" if args.pooling else
           "(the default; this directory has no sentence-transformers 1_Pooling/config.json, so the model may not "
           "have been trained for sentence similarity)")
    print(f"embedding with the BertModel encoder of {args.model} ({c.num_hidden_layers} layers, hidden "
          f"{c.hidden_size}): {'mean of the token vectors over the attention mask' if pooling == 'mean' else 'the [CLS] vector'} "
          f"{why}, {'not ' if args.no_normalize else ''}L2-normalised; no task head is used", file=sys.stderr)
    limit = c.max_position_embeddings
    for i, t in enumerate(args.texts):
        n = len(tokenizer.tokenize(t)) + 2
        if n > limit:
            print(f"note: text [{i}] is {n} tokens long: it is cut to the model's {limit} (max_position_embeddings)",
                  file=sys.stderr)
    e = embed(model, tokenizer, args.texts, pooling, normalize=not args.no_normalize)
    if args.vectors:
        print(json.dumps([[round(float(x), 6) for x in row] for row in e]))
        return 0
    u = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    sim = u @ u.T
    print("cosine similarity")
    for i, t in enumerate(args.texts):
        print(f"  [{i}] {t}")
    print("      " + " ".join(f"[{j}]".rjust(6) for j in range(len(args.texts))))
    for i in range(len(args.texts)):
        print(f"  [{i}] " + " ".join(f"{sim[i, j]:6.3f}" for j in range(len(args.texts))))
    return 0
