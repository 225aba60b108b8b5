"""`npbert attribute`: which tokens made the model say what it said, as a picture.

    npbert attribute --model DIR --text "..." [--text_pair "..."] [--target LABEL]
        [--method ig|saliency|input_x_gradient|conductance|rollout|flow|grad_rollout] --output FILE.{png,html}

The model class comes from the checkpoint's config.json ("architectures"); the target from
--target, else the model's own prediction:
    sequence classification   a label name (config.id2label) or index; default the predicted label
    question answering        start:POSITION or end:POSITION; default start:<the likeliest start>
    masked LM                 POSITION:TOKEN (a token or an id); default the first [MASK] and its prediction
    token classification      POSITION:LABEL; default position 1 and its predicted label
The per-token scores are printed, and drawn to --output: a standalone HTML page (nothing from the
network) or a PNG (needs matplotlib).  Every method is npbert.interpret's (docs/interpret.md).
"""
import os
import sys

import numpy as np

import npbert
import npbert.interpret as ni
from npbert.cli.common import (CliError, UsageError, load_checkpoint, load_tokenizer, positive_int, read_model_config,
                               resolve_max_seq_length)
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.training.progress import format_duration

METHODS = ("ig", "saliency", "input_x_gradient", "conductance", "rollout", "flow", "grad_rollout")


def add_parser(commands):
    p = commands.add_parser("attribute", help="attribute a prediction to the input tokens (integrated gradients, "
                                              "rollout, ...) and draw it", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint directory with vocab.txt")
    p.add_argument("--text", required=True, help="the text whose prediction is explained")
    p.add_argument("--text_pair", help="a second segment (a question's context, a sentence pair's second)")
    p.add_argument("--target", help="what to explain (see above); default: the model's prediction")
    p.add_argument("--method", choices=METHODS, default="ig",
                   help="ig: integrated gradients; conductance: at --layer; rollout / flow / grad_rollout: from "
                        "the attention maps (docs/interpret.md)")
    p.add_argument("--layer", default=None,
                   help="the layer attributed to: bert.embeddings (default) or bert.embeddings.word_embeddings; "
                        "with --method conductance an encoder layer, bert.encoder.layer.I (default: the last)")
    p.add_argument("--n_steps", type=positive_int, default=50, help="integration points (ig, conductance)")
    p.add_argument("--integration", default="gausslegendre", metavar="RULE",
                   help="gausslegendre | riemann_left | riemann_right | riemann_middle | riemann_trapezoid")
    p.add_argument("--internal_batch_size", type=positive_int, default=None,
                   help="rows per forward during the integration (default: 10 points at a time)")
    p.add_argument("--max_seq_length", type=positive_int, default=None,
                   help="tokens kept, [CLS] and [SEP] included (default: 128, or the model's "
                        "max_position_embeddings if smaller)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="the dtype the model runs in (float64 for sums that must close to round-off)")
    p.add_argument("--output", required=True, help="FILE.html (standalone page) or FILE.png (matplotlib)")
    p.set_defaults(run=run)


def progress_printer(what):
    """progress(done, total, seconds, text) -> one line on stderr: count, rate, ETA."""

    def report(done, total, seconds, text):
        rate = done / seconds if seconds > 0 else 0.0
        eta = format_duration((total - done) / rate) if rate > 0 else "?"
        print(f"{what} {done}/{total} {text} | {rate:.2f}/s | ETA {eta}", file=sys.stderr, flush=True)
    return report


def load_model(args):
    """(model, tokenizer) from --model, the class named by config.json's architectures; the
    loading notes printed (cli.common.load_checkpoint); --max_seq_length checked against the model."""
    config = read_model_config(args.model, "--model")
    name = (getattr(config, "architectures", None) or ["BertModel"])[0]
    cls = getattr(npbert, name, None)
    if cls is None or not isinstance(cls, type) or not issubclass(cls, npbert.BertPreTrainedModel):
        print(f"note: config.json names {name!r}, not an npbert class; using BertModel", file=sys.stderr)
        cls = npbert.BertModel
    if args.max_seq_length is None:          # the default needs no note: a text is cut only where the model ends
        args.max_seq_length = min(128, int(config.max_position_embeddings))
    args.max_seq_length = resolve_max_seq_length(args.max_seq_length, config, where=f" ({args.model})")
    model = load_checkpoint(cls, args.model, "--model", dtype=np.dtype(args.dtype).type)
    return model.eval(), load_tokenizer(args.model, "--model")


def parse_target(model, tokenizer, text, enc):
    """--target text -> (npbert.interpret target, a description for people).  Which forms the model
    takes is its own declaration, model.attribution_targets (npbert/modeling/loss_terms.py)."""
    ids = enc["input_ids"][0]
    T = len(ids)
    forms = model.attribution_targets or {}
    if "model" in forms:
        raise UsageError(f"this checkpoint is a {type(model).__name__} (no task head): it predicts nothing to "
                         "attribute; use --method rollout or flow, or a fine-tuned checkpoint")
    if not forms:
        raise UsageError(model.attribution_refusal or f"npbert attribute does not handle {type(model).__name__}")
    with npbert.no_grad():
        out = model(**{k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")})
    if "token" in forms:                           # a masked LM (pre-training too): a token at a position
        logits = out[forms["token"]]
        if text is None:
            masks = np.flatnonzero(ids == tokenizer.mask_token_id)
            if not len(masks):
                raise UsageError("the text has no [MASK]: give --target POSITION:TOKEN")
            position = int(masks[0])
            token = int(np.argmax(logits[0, position]))
        else:
            position, token = _pair(text, "POSITION:TOKEN")
            position = _position(position, T)
            token = int(token) if str(token).isdigit() else _vocabulary_id(tokenizer, str(token), text)
        if not 0 <= token < model.config.vocab_size:
            raise UsageError(f"--target {text}: token id {token} is outside the vocabulary")
        return (position, token), f"token {tokenizer.convert_ids_to_tokens(token)!r} at position {position}"
    if "class" in forms:
        logits = out[forms["class"]]
        K = logits.shape[-1]
        label2id = {v: k for k, v in model.config.id2label.items()} if len(model.config.id2label) == K else {}
        if text is None:
            c = int(np.argmax(logits[0]))
        elif text in label2id:
            c = label2id[text]
        elif text.lstrip("-").isdigit():
            c = int(text)
        else:
            raise UsageError(f"--target {text!r}: not a label of this model ({', '.join(map(str, label2id))}) "
                             f"nor an index")
        if not 0 <= c < K:
            raise UsageError(f"--target {text}: out of range, the model has labels 0..{K - 1}")
        return c, f"label {model.config.id2label.get(c, c) if label2id else c} (logit {c})"
    if "span" in forms:
        side, position = ("start", int(np.argmax(out.start_logits[0]))) if text is None else _pair(text, "start|end")
        if side not in ("start", "end"):
            raise UsageError(f"--target {text!r}: give start:POSITION or end:POSITION")
        return (side, _position(position, T)), f"{side} logit at position {position}"
    if "token_class" in forms:
        logits = out[forms["token_class"]]
        if text is None:
            position = 1
            label = int(np.argmax(logits[0, position]))
        else:
            position, label = _pair(text, "POSITION:LABEL")
            position = _position(position, T)
            label2id = {v: k for k, v in model.config.id2label.items()}
            label = label2id.get(label, int(label) if str(label).isdigit() else -1)
        if not 0 <= label < logits.shape[-1]:
            raise UsageError(f"--target {text}: not a label of this model")
        return (position, label), f"label {model.config.id2label.get(label, label)} at position {position}"
    raise UsageError(f"npbert attribute does not handle {type(model).__name__}")


def _pair(text, form):
    left, sep, right = text.partition(":")
    if not sep:
        raise UsageError(f"--target {text!r}: give {form}")
    return left, (int(right) if right.lstrip("-").isdigit() else right)


def _vocabulary_id(tokenizer, token, text):
    """The id of `token` in the vocabulary, or a CliError: a token the vocabulary lacks would be
    read as [UNK] and the attribution would explain [UNK]'s score instead."""
    if token in tokenizer.vocab or token in getattr(tokenizer, "added_tokens_encoder", {}):
        return tokenizer.convert_tokens_to_ids(token)
    pieces = tokenizer.tokenize(token)
    hint = (f"; the tokenizer splits it into {pieces}: give one of those" if pieces and pieces != [token]
            and tokenizer.unk_token not in pieces else "")
    raise UsageError(f"--target {text}: {token!r} is not in the model's vocabulary (it would be read as "
                     f"{tokenizer.unk_token}){hint}, or a token id (0..{len(tokenizer.vocab) - 1})")


def _position(value, T):
    try:
        position = int(value)
    except ValueError:
        raise UsageError(f"--target: position {value!r} is not an integer") from None
    if not 0 <= position < T:
        raise UsageError(f"--target: position {position} is out of range, the input has {T} tokens (0..{T - 1})")
    return position


def run(args):
    refuse_overwriting_inputs([("--output", args.output)], [("--model", args.model)])
    ext = os.path.splitext(args.output)[1].lower()
    if ext not in (".png", ".html"):
        raise UsageError(f"--output {args.output}: give a .png or .html file")
    if ext == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("a .png needs matplotlib: pip install matplotlib (or npbert[plot]); or write --output "
                           "FILE.html") from None
    least = 3 if args.text_pair is None else 5          # [CLS] x [SEP] (y [SEP]): a token of each text
    if args.max_seq_length is not None and args.max_seq_length < least:
        raise UsageError(f"--max_seq_length {args.max_seq_length}: too short; [CLS] and [SEP] take "
                         f"{least - 1 - (args.text_pair is not None)} of them and at least one token of each text must "
                         f"fit: give {least} or more")
    model, tokenizer = load_model(args)
    try:
        enc = tokenizer(args.text, args.text_pair, truncation=True, max_length=args.max_seq_length,
                        return_tensors="np", return_special_tokens_mask=True)
    except ValueError as e:
        raise UsageError(f"--max_seq_length {args.max_seq_length}: {e}") from None
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    notes = []
    try:
        if args.method in ("rollout", "flow"):
            fn = ni.attention_rollout if args.method == "rollout" else ni.attention_flow
            kwargs = {} if args.method == "rollout" else {"progress": progress_printer("attention flow")}
            result = fn(model, enc, **kwargs)
            scores, what = result.token_attributions[0], f"{args.method}: the [CLS] row"
        else:
            target, described = parse_target(model, tokenizer, args.target, enc)
            what = f"{args.method} for {described}"
            result = _gradient_method(ni, model, enc, target, args)
            scores = result.token_attributions[0]
            if getattr(result, "convergence_delta", None) is not None:
                notes.append(f"convergence delta {float(result.convergence_delta[0]):.3g} (sum of attributions "
                             "minus F(x) - F(baseline))")
    except ValueError as e:            # npbert.interpret refusing an argument, each one given by a flag
        raise UsageError(str(e)) from None
    except TypeError as e:
        raise CliError(str(e)) from None
    print(what)
    for tok, s in zip(tokens, scores):
        print(f"{s:+.6f}  {tok}")
    title = f"{args.text!r}" + (f" / {args.text_pair!r}" if args.text_pair else "")
    if ext == ".html":
        ni.token_heatmap_html(tokens, scores, args.output, title=title, notes=[what] + notes)
    else:
        ni.token_heatmap_png(tokens, {args.method: scores}, args.output, title=f"{what}\n{title}")
    print(f"wrote {args.output}")
    return 0


def _gradient_method(ni, model, enc, target, args):
    """The gradient methods (and grad_rollout), with the flags that apply to each."""
    if args.method == "grad_rollout":
        return ni.grad_rollout(model, enc, target)
    layer = args.layer or "bert.embeddings"
    if args.method == "saliency":
        return ni.saliency(model, enc, target, layer=layer)
    if args.method == "input_x_gradient":
        return ni.input_x_gradient(model, enc, target, layer=layer)
    batch = args.internal_batch_size or 10
    common = dict(baselines=None, n_steps=args.n_steps, method=args.integration, internal_batch_size=batch,
                  return_convergence_delta=True, progress=progress_printer(args.method))
    if args.method == "ig":
        return ni.integrated_gradients(model, enc, target, layer=layer, **common)
    encoder_layer = args.layer or f"bert.encoder.layer.{model.config.num_hidden_layers - 1}"
    return ni.layer_conductance(model, enc, target, encoder_layer, **common)
