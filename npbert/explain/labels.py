"""Labels from text, as `npbert explain --label` gives them: their form follows the head (a class
by index or id2label name, one class per token, START,END positions, the token at each [MASK]),
read from the head's declarations (heads.py), never from its class.

    B = batch (1), T = tokens, K = the head's classes
"""
import numpy as np

from .errors import ExplainError
from .heads import CHOICE_HEADS, head_inputs, head_outputs, label_args, output_kinds
from .models import has_head
from .tokens import encode


# ---- labels from the command line -------------------------------------------------------------

def _label_id(config, text, K, flag):
    """A class index from an index or a name of config.id2label."""
    names = {str(v): int(k) for k, v in (config.id2label or {}).items()} if len(config.id2label or {}) == K else {}
    if text in names:
        return names[text]
    try:
        value = int(text)
    except ValueError:
        raise ExplainError(f"{flag} {text!r}: not a class index (0..{K - 1})"
                       + (f" nor a label of this model ({', '.join(names)})" if names else "")) from None
    if value != -100 and not 0 <= value < K:
        raise ExplainError(f"{flag} {text}: out of range, the head has {K} classes (0..{K - 1})")
    return value


def _floats(text, n, flag, what):
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ExplainError(f"{flag} {text!r}: give {what}") from None
    if len(values) != n:
        raise ExplainError(f"{flag} {text!r}: give {what} ({n} numbers, got {len(values)})")
    return values


def _parse(head, arg, kind, text, flag, logits, tokens, tok):
    """One label argument's array from its command-line text (logits: the output it scores)."""
    c = head.config
    T = len(tokens)
    K = None if logits is None else logits.shape[-1]
    if arg in ("start_positions", "end_positions"):
        try:
            p = int(text)
        except ValueError:
            raise ExplainError(f"{flag}: position {text!r} is not an integer") from None
        if not 0 <= p < T:
            raise ExplainError(f"{flag}: position {p} is out of range, the input has {T} tokens (0..{T - 1})")
        return np.array([p], dtype=np.int64)                                         # (B,)
    if kind == "token":                          # masked LM: one vocabulary token per [MASK] of the text
        masks = [t for t, token in enumerate(tokens) if token == tok.mask_token]
        words = text.split(",")
        if not masks:
            raise ExplainError(f"{flag} {text!r}: the text has no {tok.mask_token}: put {tok.mask_token} where the model "
                           "should predict a token, and give that token here")
        if len(words) != len(masks):
            raise ExplainError(f"{flag} {text!r}: the text has {len(masks)} {tok.mask_token} token(s): give one token "
                           f"for each, separated by commas")
        labels = np.full((1, T), -100, dtype=np.int64)                               # (B, T): -100 not asked
        for t, word in zip(masks, words):
            if word in tok.vocab:
                labels[0, t] = tok.vocab[word]
            elif word.isdigit() and int(word) < c.vocab_size:
                labels[0, t] = int(word)
            else:
                raise ExplainError(f"{flag}: {word!r} is not in the model's vocabulary (it splits into "
                               f"{tok.tokenize(word)}): give one of its tokens, or a token id")
        return labels
    if kind == "token_class":                    # one class per token, -100 for none
        values = text.split(",")
        if len(values) != T:
            raise ExplainError(f"{flag} {text!r}: give one label per token, {T} of them separated by commas (-100 for a "
                           f"token without one): {' '.join(tokens)}")
        return np.array([[_label_id(c, v.strip(), K, flag) for v in values]], dtype=np.int64)   # (B, T)
    # one label per example: a class; a number for regression; K numbers for multi-label
    if c.problem_type == "regression" or (c.problem_type is None and K == 1 and arg == "labels"):
        values = _floats(text, K, flag, "the regression target" + ("s" if K > 1 else ""))
        return np.array(values if K > 1 else values[0], dtype=np.float64)[None]     # (B,) or (B, K)
    if c.problem_type == "multi_label_classification":
        return np.array([_floats(text, K, flag, "one 0/1 value per class, separated by commas")])   # (B, K)
    value = _label_id(c, text.strip(), K, flag)
    if value == -100:
        raise ExplainError(f"{flag} -100 leaves the loss without any item: give a class")
    return np.array([value], dtype=np.int64)                                         # (B,)


def parse_labels(head, label, next_sentence_label, output, tokens, tokenizer):
    """{label argument: array} from the text of a label (and of a next-sentence label), as a command
    line gives them, for the head's forward; output: the head's output without labels."""
    names = label_args(head)
    kinds = output_kinds(head)
    outputs = dict(head_outputs(output))
    main = (next((n for n, k in kinds.items() if k == "token"), None) or next(iter(outputs)))
    if type(head).__name__ in CHOICE_HEADS:
        raise ExplainError(f"--label: {type(head).__name__} scores choices, and the page gives it one (the text): the "
                       "cross-entropy over one choice is 0 whatever the weights. Leave --label out")
    if "start_positions" in names:
        parts = label.split(",")
        if len(parts) != 2:
            raise ExplainError(f"--label {label!r}: {type(head).__name__} takes the answer span as START,END "
                           f"(token positions, 0..{len(tokens) - 1})")
        return {"start_positions": _parse(head, "start_positions", "span", parts[0], "--label START", None, tokens,
                                          tokenizer),
                "end_positions": _parse(head, "end_positions", "span", parts[1], "--label END", None, tokens,
                                        tokenizer)}
    if "next_sentence_label" in names and next_sentence_label is None:
        raise ExplainError(f"{type(head).__name__}'s loss needs --next_sentence_label too (0: --text_pair follows "
                       "--text, 1: it is a random sentence)")
    labels = {}
    for name in names:
        if name == "next_sentence_label":
            nsp = next((n for n, k in kinds.items() if k == "class"), "seq_relationship_logits")
            labels[name] = _parse(head, name, "class", str(next_sentence_label), "--next_sentence_label",
                                  outputs[nsp], tokens, tokenizer)
        else:
            labels[name] = _parse(head, name, kinds.get(main), label, "--label", outputs[main], tokens, tokenizer)
    if next_sentence_label is not None and "next_sentence_label" not in names:
        raise ExplainError(f"--next_sentence_label: {type(head).__name__} has no next-sentence loss; give --label only",
                       status=2)
    return labels


def labels_from_text(model, tokenizer, text, text_pair, label, next_sentence_label=None):
    """{label argument: array} for the head `model` from the text of a label (and of a next-sentence
    label), as `npbert explain --label` gives them; the text is tokenized as the page tokenizes it."""
    if not has_head(model):
        raise ExplainError(f"a label needs a model with a task head; {type(model).__name__} has none")
    tokens, ids, types, _ = encode(tokenizer, text, text_pair, model.config)
    output = model(**head_inputs(model, ids, types))
    return parse_labels(model, label, next_sentence_label, output, tokens, tokenizer)
