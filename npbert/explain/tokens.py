"""The page's input: a sentence (or a pair) cut into tokens by any tokenizer with transformers'
slow-tokenizer methods, and the built-in vocabulary of the small random model.

    B = batch (1), T = tokens
"""
import re

import numpy as np

from .errors import ExplainError

# The random model's vocabulary: the special tokens at transformers' usual ids, then a few words.
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "'",
              "the", "a", "an", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
              "cat", "is", "was", "and", "of", "to", "in", "on", "it", "this", "that",
              "bert", "numpy", "model", "attention", "layer", "token", "hello", "world"]

# The random model: small enough for a gradient check of every parameter in about a second.
TINY_CONFIG = dict(vocab_size=len(TINY_VOCAB), hidden_size=64, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                   type_vocab_size=2, hidden_act="gelu")


class LookupTokenizer:
    """The built-in tokenizer of the random model: lower-case, split on spaces and punctuation,
    look each word up in the vocabulary ([UNK] if absent).  No WordPiece splitting.  It has the
    methods of transformers' slow BertTokenizer that the page uses."""

    cls_token, sep_token, unk_token, mask_token = "[CLS]", "[SEP]", "[UNK]", "[MASK]"
    description = "built-in lookup tokenizer (lower-case, split on spaces/punctuation, [UNK] outside the tiny vocab)"

    def __init__(self, vocab=TINY_VOCAB, lower=True):
        self.vocab = {token: i for i, token in enumerate(vocab)}
        self.ids_to_tokens = list(vocab)
        self.lower = lower

    def tokenize(self, text):
        """'The FOX, unwanted dog!' -> ['the', 'fox', ',', '[UNK]', 'dog', '!']."""
        text = text.lower() if self.lower else text
        words = re.findall(r"\[MASK\]|\w+|[^\w\s]", text, flags=re.I)
        return [w.upper() if w.upper() == self.mask_token else w if w in self.vocab else self.unk_token
                for w in words]

    def convert_tokens_to_ids(self, tokens):
        missing = sorted({t for t in tokens if t not in self.vocab})
        if missing:
            raise ExplainError(f"the vocabulary has no {', '.join(missing)}")
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.ids_to_tokens[i] for i in ids]

    def build_inputs_with_special_tokens(self, ids):
        return [self.vocab[self.cls_token]] + list(ids) + [self.vocab[self.sep_token]]


def _one(tokenizer, text):
    """[CLS] text [SEP] as tokens."""
    ids = tokenizer.build_inputs_with_special_tokens(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))
    return tokenizer.convert_ids_to_tokens(ids)


def encode(tokenizer, text, text_pair, config):
    """(tokens, input_ids (B, T), token_type_ids (B, T), a note on truncation or ""): [CLS] text [SEP]
    [text_pair [SEP]], token type 0 for the first sentence, 1 for the second.  One sentence longer
    than max_position_embeddings is cut to it (... [SEP]); a pair that is too long is an error."""
    P, V = config.max_position_embeddings, config.vocab_size
    tokens, note = _one(tokenizer, text), ""
    n_first = len(tokens)
    if text_pair is not None:
        tokens = tokens + _one(tokenizer, text_pair)[1:]                  # b's [CLS] dropped
        if len(tokens) > P:
            raise ExplainError(f"text and text_pair make {len(tokens)} tokens, more than the model's "
                               f"max_position_embeddings={P}: shorten them")
    elif len(tokens) > P:
        tokens, n_first = tokens[:P - 1] + tokens[-1:], P                 # ... [SEP]
        note = f", truncated to max_position_embeddings={P}"
    ids = np.array([tokenizer.convert_tokens_to_ids(tokens)], dtype=np.int64)          # (B, T)
    if ids.max() >= V:
        raise ExplainError(f"token id {int(ids.max())} is outside the model's vocab_size={V}: "
                           "the tokenizer does not belong to this model")
    types = (np.arange(len(tokens)) >= n_first).astype(np.int64)[None]               # (B, T): 0 a, 1 b
    return tokens, ids, types, note
