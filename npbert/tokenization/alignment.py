"""What a BatchEncoding's fast-tokenizer methods read: each token's word, sequence and characters.

transformers' Rust tokenizer keeps, for every row it encodes, a `tokenizers.Encoding` (tokens,
word index, sequence index and character offsets of every token), which `BatchEncoding.tokens()`,
`word_ids()`, `char_to_token()`, ... read.  npbert computes the same lists only when one of those
methods is first called on a row, so `tokenizer(texts)` costs nothing more when they are not used:

    __call__       records per row a RowLayout: the sequence(s) it was made of (a str, the words
                   of is_split_into_words, or ids), the tokens of each that truncation kept, whether
                   [CLS]/[SEP] were added, and the padding on either side
    Alignment.row  tokenizes each sequence once more with word indices and offsets
                   (`encode_text_aligned`), keeps the same tokens, puts [CLS], [SEP] and padding
                   around them -> RowAlignment(ids, words, sequences, offsets)

The words are those of transformers' Rust tokenizer (its pre-tokenizer splits where the
BasicTokenizer does): a run of letters/digits, one punctuation character, one CJK ideograph, a
special token typed in the text; with is_split_into_words, the caller's words.  They are counted
from 0 in each sequence of a pair; [CLS], [SEP] and padding belong to no word and no sequence.
The row's ids are recomputed, and checked against the encoding's `input_ids`: if the tokenizer was
changed since (add_tokens) or `input_ids` was edited, the methods say so instead of answering for
other tokens.
"""
from dataclasses import dataclass
from typing import NamedTuple

from npbert.tokenization import aligned


class CharSpan(NamedTuple):
    """Characters `start:end` of the original text (transformers' CharSpan)."""

    start: int
    end: int


class TokenSpan(NamedTuple):
    """Tokens `start:end` of an encoded row (transformers' TokenSpan)."""

    start: int
    end: int


@dataclass
class RowLayout:
    """How one row of a BatchEncoding was put together.

    sources: one or two sequences as given: a str, extras.Words (is_split_into_words), or a
        list of ids.  kept: per sequence, the (start, stop) of its tokens that truncation kept.
    """

    sources: tuple
    kept: tuple
    add_special_tokens: bool
    pad_left: int = 0
    pad_right: int = 0


@dataclass
class RowAlignment:
    """Per token of one row: id, word index, sequence index (None for [CLS], [SEP], padding),
    (start, end) in its sequence's text; `offsets` is None where there is no text (words given
    by the caller, or ids), with `why` saying which."""

    ids: list
    tokens: list
    words: list
    sequences: list
    offsets: list
    why: str = ""
    n_sequences: int = 1


def encode_text_aligned(tokenizer, text):
    """One text -> (ids, offsets, words), no special tokens added: the ids of
    `tokenizer._encode_text(text)`, each token's (start, end) in `text` and the index of its word."""
    ids, offsets, words = [], [], []
    basic = tokenizer.basic_tokenizer if tokenizer.do_basic_tokenize else None
    n_words = 0
    for start, end, special in tokenizer._segments(text):
        if special is not None:                       # a special token typed in the text: one word
            ids.append(tokenizer._segment_ids[special])
            offsets.append((start, end))
            words.append(n_words)
            n_words += 1
            continue
        local = []
        tokens, spans = aligned.wordpieces_with_spans(basic, tokenizer._never_split,
                                                      tokenizer.wordpiece_tokenizer.tokenize_word,
                                                      text[start:end], words_out=local)
        ids += tokenizer.convert_tokens_to_ids(tokens)
        offsets += [(start + s, start + e) for s, e in spans]
        words += [n_words + w for w in local]
        n_words += local[-1] + 1 if local else 0
    return ids, offsets, words


def _sequence(tokenizer, source):
    """One sequence as given -> (ids, offsets or None, words, why offsets are None)."""
    if isinstance(source, str):
        ids, offsets, words = encode_text_aligned(tokenizer, source)
        return ids, offsets, words, ""
    if hasattr(source, "words"):                       # extras.Words: is_split_into_words=True
        ids, words = [], []
        for w, word in enumerate(source.words):
            word_ids = tokenizer._encode_text(word, False)[0]
            ids += word_ids
            words += [w] * len(word_ids)
        return ids, None, words, ("the input was given as words (is_split_into_words=True), so there are no "
                                  "character positions in one text; use word_ids() / word_to_tokens()")
    # ids given by the caller: a piece that does not start with "##" starts a word
    words, w = [], -1
    for i in source:
        if w < 0 or not tokenizer.ids_to_tokens.get(int(i), "").startswith("##"):
            w += 1
        words.append(w)
    return [int(i) for i in source], None, words, "the input was given as token ids, not text"


class Alignment:
    """The RowLayouts of one BatchEncoding and the tokenizer that made it; rows computed on demand.
    `flat`: the encoding holds one row as a flat list (one text, no return_tensors)."""

    def __init__(self, tokenizer, layouts, flat):
        self.tokenizer = tokenizer
        self.layouts = layouts
        self.flat = flat
        self.n_rows = len(layouts)
        self.n_sequences = 2 if any(len(layout.sources) == 2 for layout in layouts) else 1
        self._rows = {}

    def __len__(self):
        return self.n_rows

    def __getstate__(self):
        """Pickled (or deep-copied) with every row computed and without the tokenizer."""
        for b in range(self.n_rows):
            if b not in self._rows:
                self._rows[b] = self._compute(self.layouts[b])
        return {**self.__dict__, "tokenizer": None, "layouts": None}

    def row(self, b, input_ids):
        """RowAlignment of row `b`; `input_ids` is that row as the encoding holds it now."""
        row = self._rows.get(b)
        if row is None:
            row = self._rows[b] = self._compute(self.layouts[b])
        stored = [int(i) for i in input_ids]
        if stored != row.ids:
            raise ValueError(
                f"Row {b} of this encoding no longer matches its text: its input_ids differ from what the tokenizer "
                "gives now (tokens added to the tokenizer since, or input_ids edited). Encode the text again.")
        return row

    def _compute(self, layout):
        tok = self.tokenizer
        ids, words, sequences, offsets, why = [], [], [], [], ""
        n = len(layout.sources)
        for s, (source, (start, stop)) in enumerate(zip(layout.sources, layout.kept)):
            seq_ids, seq_offsets, seq_words, seq_why = _sequence(tok, source)
            why = why or seq_why
            if layout.add_special_tokens and s == 0:
                ids.append(tok._cls_id), words.append(None), sequences.append(None), offsets.append((0, 0))
            ids += seq_ids[start:stop]
            words += seq_words[start:stop]
            sequences += [s] * (stop - start)
            offsets += seq_offsets[start:stop] if seq_offsets is not None else [(0, 0)] * (stop - start)
            if layout.add_special_tokens:
                ids.append(tok._sep_id), words.append(None), sequences.append(None), offsets.append((0, 0))
        pad = tok.pad_token_id
        left, right = layout.pad_left, layout.pad_right
        ids = [pad] * left + ids + [pad] * right
        return RowAlignment(
            ids=ids, tokens=tok.convert_ids_to_tokens(ids),
            words=[None] * left + words + [None] * right,
            sequences=[None] * left + sequences + [None] * right,
            offsets=[(0, 0)] * left + offsets + [(0, 0)] * right,
            why=why, n_sequences=n)
