"""`npbert attention`: the attention maps of a sentence as a picture (layers x heads, or one head),
with a colour bar, labels that do not overlap, and a CJK font when the text needs one
(npbert/interpret/attention_picture.py)."""
import sys
import warnings

import npbert
from npbert.cli.common import CliError, UsageError, load_checkpoint, load_tokenizer, non_negative_int, one_line
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.interpret.attention_picture import plot_attention
from npbert.training.plots import have_matplotlib


def add_parser(commands):
    p = commands.add_parser("attention", help="draw the attention maps of a sentence (PNG)",
                            description="Run a sentence through a model and draw its attention probabilities: a "
                                        "grid of every layer and head, or one head large with --layer and --head. "
                                        "Needs matplotlib (pip install npbert[plot]).")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint directory with vocab.txt")
    p.add_argument("--text", required=True, help="the sentence to draw")
    p.add_argument("--text_pair", help="a second segment ([SEP] between the two)")
    p.add_argument("--layer", type=non_negative_int, help="draw one layer's head large (with --head)")
    p.add_argument("--head", type=non_negative_int, help="the head to draw large (with --layer)")
    p.add_argument("--output", default="attention.png", help="the PNG to write")
    p.set_defaults(run=run)


def run(args):
    refuse_overwriting_inputs([("--output", args.output)], [("--model", args.model)])
    if not have_matplotlib():
        raise CliError("drawing needs matplotlib: pip install matplotlib (or pip install npbert[plot])")
    if (args.layer is None) != (args.head is None):
        raise UsageError("give both --layer and --head (one head), or neither (the grid)")
    model = load_checkpoint(npbert.BertModel, args.model)
    tokenizer = load_tokenizer(args.model)
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    if args.layer is not None and not (args.layer < L and args.head < N):
        raise UsageError(f"--layer {args.layer} --head {args.head}: the model has layers 0..{L - 1} and heads "
                         f"0..{N - 1}")
    limit = model.config.max_position_embeddings
    enc = tokenizer(args.text, args.text_pair, truncation=True, max_length=limit, return_tensors="np")
    full = len(tokenizer(args.text, args.text_pair)["input_ids"])
    if full > limit:
        print(f"note: the text is {full} tokens long; the model takes {limit} (max_position_embeddings): the "
              f"picture shows the first {limit}", file=sys.stderr)
    with npbert.no_grad():
        out = model(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"], output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = plot_attention(out.attentions, tokens, args.output, title=args.text, layer=args.layer, head=args.head)
    for w in caught:
        print(f"note: {one_line(w.message)}", file=sys.stderr)
    what = f"layer {args.layer} head {args.head}" if args.layer is not None else f"{L} layers x {N} heads"
    print(f"wrote {path}: {what}, {len(tokens)} tokens")
    return 0
