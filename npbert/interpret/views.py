"""The data bertviz's views take, from any BERT npbert loads (bertviz itself is not needed here).

    data = head_view_data(model, tokenizer, "the cat sat", "it was tired")
    bertviz.head_view(**data)             # or bertviz.model_view(**data)

gives head_view / model_view their `attention` (one (1, N, T, T) array per layer: torch tensors
when torch is installed, as bertviz's format_attention stacks them with torch), `tokens` and
`sentence_b_start`.

    neuron_view_data(model, tokenizer, "the cat sat", "it was tired")

is what bertviz's neuron view draws from (bertviz.neuron_view.get_attention(...,
include_queries_and_keys=True), which only works with bertviz's own forked models): a dict with
"all" and, for a pair, "aa", "bb", "ab", "ba" (sentence A or B to A or B), each holding
"left_text" and "right_text" (the query side's and the key side's tokens), "attn" (per layer a
nested list [N][left][right] of probabilities), and "queries" / "keys" (per layer [N][left][D] and
[N][right][D]: the projections split into heads, as the scores q k^T / sqrt(D) use them).

    L = layers, N = heads, T = tokens, D = head size
"""
import numpy as np

from npbert.modeling import no_grad

from .layer_runs import inspecting


def _run(model, tokenizer, text, text_pair):
    enc = tokenizer(text, text_pair, return_tensors="np")
    with inspecting(model), no_grad():
        out = model(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"],
                    attention_mask=enc["attention_mask"], output_intermediates=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    types = enc["token_type_ids"][0]
    b_start = int(np.argmax(types == 1)) if text_pair is not None and (types == 1).any() else None
    return out.intermediates, tokens, b_start


def head_view_data(model, tokenizer, text, text_pair=None, as_torch=None):
    """{"attention": L arrays (1, N, T, T), "tokens": T strings, "sentence_b_start": int or None}.
    as_torch: torch tensors (True), NumPy arrays (False), or torch when it is installed (None)."""
    inter, tokens, b_start = _run(model, tokenizer, text, text_pair)
    attention = tuple(inter.attentions)
    if as_torch or as_torch is None:
        try:
            import torch
        except ImportError:
            if as_torch:
                raise ImportError("as_torch=True needs torch installed") from None
        else:
            attention = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in attention)
    return {"attention": attention, "tokens": tokens, "sentence_b_start": b_start}


def neuron_view_data(model, tokenizer, text, text_pair=None):
    """The neuron view's dict (see the module's docstring), from one forward with
    output_intermediates=True."""
    inter, tokens, b_start = _run(model, tokenizer, text, text_pair)
    T = len(tokens)
    spans = {"all": (slice(0, T), slice(0, T))}
    names = {"all": (tokens, tokens)}
    if b_start is not None:
        a, b = slice(0, b_start), slice(b_start, T)
        for key, (left, right) in {"aa": (a, a), "bb": (b, b), "ab": (a, b), "ba": (b, a)}.items():
            spans[key] = (left, right)
            names[key] = (tokens[left], tokens[right])
    data = {}
    for key, (left, right) in spans.items():
        data[key] = {
            "attn": [A[0][:, left, right].tolist() for A in inter.attentions],              # L x [N][left][right]
            "left_text": names[key][0], "right_text": names[key][1],
            "queries": [q[0][:, left, :].tolist() for q in inter.query],                  # L x [N][left][D]
            "keys": [k[0][:, right, :].tolist() for k in inter.key],                      # L x [N][right][D]
        }
    return data
