"""`npbert attention`: the attention maps of a sentence as a picture (layers x heads, or one head)."""
import os
import warnings

from npbert.cli.common import CliError, non_negative_int


def add_parser(commands):
    p = commands.add_parser("attention", help="draw the attention maps of a sentence (PNG)",
                            description="Run a sentence through a model and draw its attention probabilities: a "
                                        "grid of every layer and head, or one head large with --layer and --head. "
                                        "Needs matplotlib (pip install npbert[plot]).")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint directory with vocab.txt")
    p.add_argument("--text", required=True)
    p.add_argument("--text_pair", help="a second segment")
    p.add_argument("--layer", type=non_negative_int)
    p.add_argument("--head", type=non_negative_int)
    p.add_argument("--output", default="attention.png", help="the PNG to write (default attention.png)")
    p.set_defaults(run=run)


def run(args):
    import npbert
    from npbert.training.plots import have_matplotlib, plot_attention
    if not have_matplotlib():
        raise CliError("drawing needs matplotlib: pip install matplotlib (or pip install npbert[plot])")
    if (args.layer is None) != (args.head is None):
        raise CliError("give both --layer and --head (one head), or neither (the grid)")
    if not os.path.isdir(args.model):
        raise CliError(f"--model {args.model}: not a directory")
    try:
        tokenizer = npbert.BertTokenizer.from_pretrained(args.model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")              # a head model's unused weights
            model = npbert.BertModel.from_pretrained(args.model)
    except (OSError, ValueError, KeyError) as e:
        raise CliError(f"--model {args.model}: {e}") from None
    L, N = model.config.num_hidden_layers, model.config.num_attention_heads
    if args.layer is not None and not (args.layer < L and args.head < N):
        raise CliError(f"the model has layers 0..{L - 1} and heads 0..{N - 1}")
    enc = tokenizer(args.text, args.text_pair, truncation=True, max_length=model.config.max_position_embeddings,
                    return_tensors="np")
    with npbert.no_grad():
        out = model(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"], output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    path = plot_attention(out.attentions, tokens, args.output, title=args.text, layer=args.layer, head=args.head)
    print(f"wrote {path}: {'layer %d head %d' % (args.layer, args.head) if args.layer is not None else f'{L} layers x {N} heads'}, "
          f"{len(tokens)} tokens")
    return 0
