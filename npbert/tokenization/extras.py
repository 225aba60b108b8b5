"""The rest of the tokenizer interface tutorials call (transformers 4.x names and semantics).

    tok.encode_plus(text, text_pair=None, **kw)         one example  -> BatchEncoding
    tok.batch_encode_plus(texts_or_pairs, **kw)         a batch      -> BatchEncoding
    tok(words, is_split_into_words=True)                each word of a list tokenized alone

`word_ids()` and the other methods of transformers' fast tokenizers' BatchEncoding are in
encoding.py and alignment.py.
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
        if text[0] and isinstance(text[0][0], (list, tuple)):       # a batch of (words, pair_words)
            return [tuple(Words(words) for words in item) for item in text]
        return [Words(t) for t in text]
    return Words(text)


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
