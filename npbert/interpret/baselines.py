"""The baseline x' of integrated gradients and conductance: where the path from x' to x starts.

The default is the one captum's BERT tutorials build: the input with every token replaced by
[PAD] except the special ones, so one sentence gives

    input     [CLS] the movie was great [SEP]
    baseline  [CLS] [PAD] [PAD] [PAD] [PAD] [SEP]

and a pair keeps its middle [SEP] too ([CLS] [PAD]... [SEP] [PAD]... [SEP]).  The baseline keeps
the input's attention mask, token types and positions: only the ids differ, so the attributions
are those of the tokens' identities.  Which tokens are special comes from
`inputs["special_tokens_mask"]` (tokenizer(..., return_special_tokens_mask=True)), or from a
tokenizer's [CLS]/[SEP] ids (`tokenizer=`); [PAD] is the tokenizer's pad id, else
`config.pad_token_id`.

Other baselines (`baselines=`): token ids of the input's shape (B, T), or one row (T,) for every
example, or an integer (every id that token, captum's scalar baseline); or the layer's output
itself, floats (B, T, H) or (T, H) (e.g. zeros: the all-zero embedding).
"""
import numpy as np


def default_baseline_ids(model, inputs, special_tokens_mask=None, tokenizer=None):
    """[CLS] + [PAD]... + [SEP] (B, T): the special tokens of the input kept, every other id [PAD]."""
    ids = inputs["input_ids"]
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = model.config.pad_token_id if pad is None else pad
    if special_tokens_mask is None:
        if tokenizer is None:
            raise ValueError("the default baseline ([CLS] + [PAD]... + [SEP]) needs to know which tokens are special: "
                             "pass tokenizer=..., or inputs with special_tokens_mask (tokenizer(..., "
                             "return_special_tokens_mask=True)), or baselines=...")
        specials = [getattr(tokenizer, n, None) for n in ("cls_token_id", "sep_token_id")]
        if any(s is None for s in specials):
            raise ValueError("the tokenizer has no [CLS]/[SEP] ids: pass baselines=... explicitly")
        special_tokens_mask = np.isin(ids, specials)
    if pad is None:
        raise ValueError("the default baseline needs a [PAD] id: the config has no pad_token_id; pass tokenizer=...")
    return np.where(special_tokens_mask, ids, pad).astype(np.int64)


def baseline_ids_or_values(model, inputs, baselines, H):
    """A given baseline -> ("ids", (B, T) int64) or ("values", (B, T, H) in the model's dtype); a wrong
    shape or type is an error saying which shapes fit."""
    B, T = inputs["input_ids"].shape
    a = np.asarray(baselines)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"baselines must be token ids or floats, got dtype {a.dtype}")
    if np.issubdtype(a.dtype, np.integer) and not a.dtype == bool:
        if a.ndim == 0 or a.shape in ((T,), (1, T), (B, T)):
            ids = np.broadcast_to(a, (B, T)).astype(np.int64)
            V = model.config.vocab_size
            if ids.min() < 0 or ids.max() >= V:
                raise ValueError(f"baselines hold token ids outside [0, {V}) (vocab_size)")
            return "ids", ids
        raise ValueError(f"baselines of token ids have shape {a.shape}; the inputs need ({B}, {T}), ({T},) "
                         f"or a single id")
    if a.shape in ((T, H), (1, T, H), (B, T, H)):
        return "values", np.broadcast_to(a, (B, T, H)).astype(model.state.dtype)
    raise ValueError(f"baselines of floats are the layer's output and have shape {a.shape}; the inputs need "
                     f"({B}, {T}, {H}) or ({T}, {H}) (token ids: ({B}, {T}) integers)")
