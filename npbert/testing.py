"""Hypothesis strategies for property tests of BERT implementations, npbert's or your own.

    bert_configs(...)               valid BertConfigs: hidden divisible by heads, small sizes so a model
                                    builds in milliseconds; hidden_act drawn from all TEN activations
                                    npbert has (ACTIVATIONS) unless activations=("gelu",) says otherwise
    state_dicts(model, ...)         random O(1) weights for model.load_state_dict: every parameter drawn,
                                    biases too, LayerNorm weights around 1 (the default init, std 0.02
                                    and zero biases, hides bias and scale bugs)
    model_inputs(config, ...)       {"input_ids", "attention_mask", "token_type_ids"} (and optionally
                                    "inputs_embeds" instead of ids): ids in range, at least one kept
                                    token per row; padded rows and one-token sequences come up often
    attention_masks(batch, seq)     0/1 masks (B, T), every row keeping at least one token
    head_masks(config)              (L, N) 0/1 head masks, with zeros
    texts()                         text that exercises a BERT tokenizer: ASCII words and punctuation,
                                    accents and combining marks, CJK, whitespace runs, control and
                                    zero-width characters
    characters()                    one code point, weighted towards the ones tokenizers get wrong
    vocabularies()                  WordPiece vocabularies: the special tokens first, then words and ## pieces

Re-exported from npbert.layers (no hypothesis needed there): get_extended_attention_mask (1/0 mask ->
additive), layer_state_dict, layer_forward / layer_backward (one encoder layer), embeddings_forward /
embeddings_backward.  Compare in float64: build models with dtype=np.float64.

    from hypothesis import given
    import npbert, npbert.testing as nt

    @given(nt.bert_configs().flatmap(lambda c: nt.model_inputs(c).map(lambda x: (c, x))))
    def test_my_port(case):
        config, inputs = case
        ...

hypothesis is needed only here (`pip install hypothesis`); npbert itself does not import it.
"""
try:
    from hypothesis import strategies as st
except ImportError as e:                     # pragma: no cover - depends on the environment
    raise ImportError("npbert.testing needs hypothesis: pip install hypothesis (or npbert[test])") from e

import numpy as np

from npbert.config import BertConfig
from npbert.layers import (embeddings_backward, embeddings_forward, get_extended_attention_mask,  # noqa: F401
                           layer_backward, layer_forward, layer_state_dict)

__all__ = ["bert_configs", "ACTIVATIONS", "state_dicts", "model_inputs", "attention_masks", "head_masks", "texts",
           "characters", "vocabularies", "SPECIAL_TOKENS", "get_extended_attention_mask", "layer_state_dict",
           "layer_forward", "layer_backward", "embeddings_forward", "embeddings_backward"]

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "quick_gelu", "tanh",
               "sigmoid", "linear")
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@st.composite
def bert_configs(draw, max_layers=2, max_heads=4, max_head_size=8, max_vocab=64, max_positions=32,
                 activations=ACTIVATIONS, dropout=False):
    """Valid, small BertConfigs (dropout 0 unless dropout=True, so forwards are deterministic).

    hidden_act is drawn from `activations`, by default all of ACTIVATIONS (exact and tanh GELUs,
    ReLU, SiLU, ...): an implementation that has only exact GELU passes activations=("gelu",).
    layer_norm_eps is 1e-12 (BERT's) or 1e-5 (torch's default), pad_token_id 0."""
    heads = draw(st.integers(1, max_heads))
    head_size = draw(st.integers(1, max_head_size))
    p = draw(st.sampled_from([0.0, 0.1, 0.5])) if dropout else 0.0
    config = BertConfig(vocab_size=draw(st.integers(8, max_vocab)), hidden_size=heads * head_size,
                        num_hidden_layers=draw(st.integers(1, max_layers)), num_attention_heads=heads,
                        intermediate_size=draw(st.integers(1, 4 * heads * head_size)),
                        max_position_embeddings=draw(st.integers(4, max_positions)),
                        type_vocab_size=draw(st.integers(1, 3)), hidden_act=draw(st.sampled_from(activations)),
                        hidden_dropout_prob=p, attention_probs_dropout_prob=p,
                        layer_norm_eps=draw(st.sampled_from([1e-12, 1e-5])), pad_token_id=0)
    config.validate()
    return config


@st.composite
def state_dicts(draw, model, scales=(0.3, 0.6, 1.0)):
    """{name: array} for `model.load_state_dict`: every parameter of `model` (keys, shapes and dtype
    as model.state_dict()) drawn at random with O(1) entries, so that no bias is 0 and no scale 1.

    One standard deviation s from `scales` per draw; weights, embeddings and biases ~ N(0, s^2),
    LayerNorm weights ~ 1 + N(0, s^2).  The padding row is drawn too (it is a parameter like the
    others; only its gradient is special).  Drawn from a seed, so an example shrinks to a seed and a scale.

        model.load_state_dict(data.draw(nt.state_dicts(model)))
    """
    s = draw(st.sampled_from(scales))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    out, drawn = {}, {}
    for name, p in model.state_dict().items():
        if id(p) not in drawn:        # a tied weight (the MLM decoder's) is one array under two names
            base = 1.0 if name.endswith("LayerNorm.weight") else 0.0
            drawn[id(p)] = (base + rng.normal(0.0, s, size=p.shape)).astype(p.dtype)
        out[name] = drawn[id(p)]
    return out


@st.composite
def attention_masks(draw, batch, seq):
    """(batch, seq) int64 masks of 1 (attend) and 0 (padding) with at least one 1 a row; about a
    third of the rows are right-padded, some masks have holes."""
    rows = []
    for _ in range(batch):
        kind = draw(st.sampled_from(["full", "padded", "padded", "holes"]))
        if kind == "full":
            row = [1] * seq
        elif kind == "padded":
            n = draw(st.integers(1, seq))
            row = [1] * n + [0] * (seq - n)
        else:
            row = draw(st.lists(st.integers(0, 1), min_size=seq, max_size=seq))
            row[draw(st.integers(0, seq - 1))] = 1
        rows.append(row)
    return np.array(rows, dtype=np.int64)


@st.composite
def model_inputs(draw, config, max_batch=3, max_seq=None, inputs_embeds=False, dtype=np.float64):
    """Inputs the model accepts: ids in [0, vocab_size), masks keeping a token a row, token types
    in [0, type_vocab_size); with inputs_embeds=True an (B, T, H) array instead of input_ids."""
    max_seq = min(max_seq or config.max_position_embeddings, config.max_position_embeddings)
    B = draw(st.integers(1, max_batch))
    T = draw(st.one_of(st.just(1), st.integers(1, max_seq)))             # one-token sequences often
    out = {"attention_mask": draw(attention_masks(B, T)),
           "token_type_ids": np.array(draw(st.lists(st.lists(st.integers(0, config.type_vocab_size - 1),
                                                              min_size=T, max_size=T), min_size=B, max_size=B)),
                                      dtype=np.int64)}
    if inputs_embeds:
        seed = draw(st.integers(0, 2 ** 32 - 1))
        out["inputs_embeds"] = np.random.default_rng(seed).normal(size=(B, T, config.hidden_size)).astype(dtype)
    else:
        out["input_ids"] = np.array(draw(st.lists(st.lists(st.integers(0, config.vocab_size - 1), min_size=T,
                                                           max_size=T), min_size=B, max_size=B)), dtype=np.int64)
    return out


@st.composite
def head_masks(draw, config):
    """(L, N) masks of 0.0 and 1.0 multiplying the attention probabilities; zeros come up often."""
    L, N = config.num_hidden_layers, config.num_attention_heads
    return np.array(draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 1.0]), min_size=N, max_size=N),
                                  min_size=L, max_size=L)))


_PIECES = st.sampled_from([
    "the", "cat", "Héllo", "naïve", "e\u0301", "İstanbul", "straße", "ﬁne", "don't", "U.S.A.", "1,234.56",
    "中文", "日本語", "한국어", "\u4e00", "\U00020000", "!", "?", "...", "-", "(", ")", "$", "\u00a0", "\t", "\n",
    "\u200b", "\x00", "\ufffd", "\u0301", "😀", "ℕ", "Ǆ",
])

# Single characters where tokenizers have disagreed: case mappings that change length or depend on
# context, combining marks of several classes, control / format / zero-width characters, every kind
# of whitespace, CJK blocks and the last code point of each (unassigned in some Unicode versions),
# kana and hangul (not CJK for BERT), emoji with modifiers, BERT's own special-token spellings.
_CHARACTERS = (
    list("İıßẞΣσςÅÉéǅǄﬁ") + ["\u0301", "\u0308", "\u0345", "\u0316", "\u093c", "\u0958"]
    + ["\x00", "\x07", "\x0b", "\x1c", "\x85", "\x7f", "\u00ad", "\u200b", "\u200d", "\ufeff", "\ufffd"]
    + [" ", "\t", "\n", "\r", "\u00a0", "\u2000", "\u2028", "\u2029", "\u3000"]
    + ["中", "文", "\u3400", "\u4dbf", "\u9fff", "\uf900", "\ufa6d", "\ufaff", "\U00020000", "\U0002a6df",
       "\U0002b73f", "\U0002b81f", "\U0002b820", "\U0002f800", "\U0002fa1f", "あ", "ア", "한"]
    + ["\u1100", "\u1161", "\u11a8", "\u0b47", "\u0b3e", "\u1fef", "\u037e", "·", "、", "。", "，"]
    + ["👍", "\U0001f3fd", "❤", "\ufe0f", "[", "]", "#", "-", "'"]
    + list("aAbBzZ09.,!?$^`~")
)


def characters():
    """One code point: any (every category but surrogates), or from the ranges where BERT's
    BasicTokenizer does something (Latin with accents, CJK ideographs and their extensions,
    combining marks), or one of the characters where tokenizers have disagreed."""
    return st.one_of(
        st.characters(),
        st.characters(min_codepoint=0, max_codepoint=0x24F),                  # ASCII, Latin-1, Latin Extended
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),            # CJK Unified Ideographs
        st.characters(min_codepoint=0x20000, max_codepoint=0x2FA1F),          # CJK extensions, compatibility
        st.characters(categories=["Mn", "Mc", "Me"]),                         # combining marks
        st.sampled_from(_CHARACTERS),
    )


def texts(max_pieces=12):
    """Strings that exercise every step of BERT's BasicTokenizer: cleaning (control and zero-width
    characters), CJK spacing, accents and combining marks, punctuation, whitespace runs.

    Two kinds, both shrinking to something short: words and symbols from a fixed list (each an
    atom, so a failure shrinks to one of them, e.g. 'naïve'), joined with or without spaces, mixed
    with short arbitrary strings; and strings of single characters() with whitespace runs."""
    words = st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=max_pieces).map(
        lambda parts: " ".join(parts) if len(parts) % 2 else "".join(parts))
    whitespace_run = st.text(st.sampled_from(" \t\n\r\u00a0\u3000\u2028"), min_size=2, max_size=4)
    chars = st.lists(st.one_of(characters(), whitespace_run), max_size=4 * max_pieces).map("".join)
    return st.one_of(words, chars)


@st.composite
def vocabularies(draw, min_size=8, max_size=60):
    """WordPiece vocabularies (lists of tokens): the special tokens first, then lower-case words
    and ## continuation pieces, no duplicates."""
    letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
    words = draw(st.lists(letters, min_size=min_size, max_size=max_size, unique=True))
    pieces = draw(st.lists(letters.map(lambda s: "##" + s), max_size=max_size // 2, unique=True))
    return list(SPECIAL_TOKENS) + sorted(set(words)) + sorted(set(pieces))
