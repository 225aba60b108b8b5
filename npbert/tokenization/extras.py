"""The rest of the tokenizer interface tutorials call (transformers 4.x names and semantics).

    tok.encode_plus(text, text_pair=None, **kw)         one example  -> BatchEncoding
    tok.batch_encode_plus(texts_or_pairs, **kw)         a batch      -> BatchEncoding
    tok(words, is_split_into_words=True).word_ids()     token -> index of its word (NER alignment)

`word_ids()` is what transformers' fast (Rust) tokenizers give: None for [CLS], [SEP] and
padding; for words given by the caller (`is_split_into_words=True`) the index of the word a
token came from; for text, the index of the BasicTokenizer word (split at whitespace and
punctuation, each CJK character a word), counted again from 0 in the second text of a pair.
"""


class Words:
    """One sequence given as words (`is_split_into_words=True`)."""

    def __init__(self, words):
        if not all(isinstance(w, str) for w in words):
            raise ValueError("is_split_into_words=True takes a list of words (str) per sequence, got "
                             f"{[type(w).__name__ for w in words][:5]}")
        self.words = list(words)


def as_words(text):
    """The text / text_pair argument with is_split_into_words=True: a list of words, or a
    batch (list) of lists of words -> Words or a list of Words."""
    if text is None:
        return None
    if not isinstance(text, (list, tuple)):
        raise ValueError(f"is_split_into_words=True takes a list of words, got {type(text).__name__}")
    if text and isinstance(text[0], (list, tuple)):
        return [Words(t) for t in text]
    return Words(text)


def word_ids_from_offsets(offsets):
    """Per row: the (w, w + 1) spans that stand for word w in place of character offsets
    (is_split_into_words) -> w, and (0, 0) (special tokens, padding) -> None."""
    return [[None if (a, b) == (0, 0) else a for a, b in row] for row in offsets]


class TokenizerExtras:
    """Mixed into BertTokenizer."""

    def encode_plus(self, text, text_pair=None, **kwargs):
        """One text or pair (a str, a list of ids, or a list of words with
        is_split_into_words=True) -> BatchEncoding, as `tok(text, text_pair, **kwargs)`."""
        single = isinstance(text, str) or (isinstance(text, (list, tuple)) and (
            not text or isinstance(text[0], int) or kwargs.get("is_split_into_words") and isinstance(text[0], str)))
        if not single:
            raise ValueError("encode_plus encodes one text or one pair; for a batch use batch_encode_plus "
                             "(or tok(list_of_texts))")
        return self(text, text_pair, **kwargs)

    def batch_encode_plus(self, batch_text_or_text_pairs, **kwargs):
        """A list of texts or of (text, text_pair) tuples -> BatchEncoding of lists, as
        `tok(batch, **kwargs)`."""
        if isinstance(batch_text_or_text_pairs, str) or not isinstance(batch_text_or_text_pairs, (list, tuple)):
            raise ValueError("batch_encode_plus takes a list of texts or of (text, text_pair) pairs, got "
                             f"{type(batch_text_or_text_pairs).__name__}")
        if "text_pair" in kwargs:
            raise TypeError("batch_encode_plus takes the pairs inside its list: [(text, text_pair), ...]")
        return self(list(batch_text_or_text_pairs), **kwargs)

    def _word_ids_from_tokens(self, rows):
        """word_ids() of text: a token that does not start with "##" starts a word; [CLS],
        [SEP] and [PAD] have none; the count starts again after a [SEP]."""
        specials = {self._cls_id, self._sep_id, self.pad_token_id}
        out = []
        for row in rows:
            word, ids = -1, []
            for i in row:
                if i in specials:
                    ids.append(None)
                    if i == self._sep_id:
                        word = -1
                    continue
                if not self.ids_to_tokens.get(i, "").startswith("##") or word < 0:
                    word += 1
                ids.append(word)
            out.append(ids)
        return out
