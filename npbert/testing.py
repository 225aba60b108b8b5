"""Hypothesis strategies for property tests of BERT implementations, npbert's or your own.

    bert_configs(...)               valid BertConfigs: hidden divisible by heads, every activation npbert
                                    has, small sizes so a model builds in milliseconds
    model_inputs(config, ...)       {"input_ids", "attention_mask", "token_type_ids"} (and optionally
                                    "inputs_embeds" instead of ids): ids in range, at least one kept
                                    token per row; padded rows and one-token sequences come up often
    attention_masks(batch, seq)     0/1 masks (B, T), every row keeping at least one token
    head_masks(config)              (L, N) 0/1 head masks, with zeros
    texts()                         text that exercises a BERT tokenizer: ASCII words and punctuation,
                                    accents and combining marks, CJK, whitespace and control characters
    vocabularies()                  WordPiece vocabularies: the special tokens first, then words and ## pieces

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

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "quick_gelu", "tanh",
               "sigmoid", "linear")
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@st.composite
def bert_configs(draw, max_layers=2, max_heads=4, max_head_size=8, max_vocab=64, max_positions=32,
                 activations=ACTIVATIONS, dropout=False):
    """Valid, small BertConfigs (dropout 0 unless dropout=True, so forwards are deterministic)."""
    from npbert.config import BertConfig
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


def texts(max_pieces=12):
    """Strings that exercise every step of BERT's BasicTokenizer: cleaning (control and zero-width
    characters), CJK spacing, accents and combining marks, punctuation, whitespace."""
    return st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=max_pieces).map(
        lambda parts: " ".join(parts) if len(parts) % 2 else "".join(parts))


@st.composite
def vocabularies(draw, min_size=8, max_size=60):
    """WordPiece vocabularies (lists of tokens): the special tokens first, then lower-case words
    and ## continuation pieces, no duplicates."""
    letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
    words = draw(st.lists(letters, min_size=min_size, max_size=max_size, unique=True))
    pieces = draw(st.lists(letters.map(lambda s: "##" + s), max_size=max_size // 2, unique=True))
    return list(SPECIAL_TOKENS) + sorted(set(words)) + sorted(set(pieces))
