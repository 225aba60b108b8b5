"""The BasicTokenizer's steps carrying character spans (offsets), with an ASCII shortcut.

The tokens are those of the plain steps in `basic.py` (`BasicTokenizer.tokenize` on the
reference path; `tests/tokenization` checks the two equal on random Unicode), computed here so
that every character of every token also knows the `(start, end)` span of the original text it
came from.  The fast path uses this for everything; the reference path only for
`return_offsets_mapping`, which Google's and transformers' Python tokenizers do not have.

How the spans follow each step:

    clean, CJK spacing, split   characters are kept or dropped one by one: each keeps its own span
    NFC                         a composition gets the span of everything it was made from
    lower, strip accents        computed on the whole word exactly as the plain path; the spans
                                are then derived per character (or per group of characters, for
                                NFC compositions), falling back to the whole word's span when no
                                finer split reproduces the exact string (decomposed Hangul jamo,
                                some Indic two-vowel compositions)
    punctuation                 pieces of the word keep their characters' spans

When accent stripping undoes what NFC composed ("e" + U+0301 -> "é" -> "e"), each remaining
character keeps the span of the one raw character it came from, and the dropped marks belong to
no token, as in transformers' Rust tokenizer.  A `spans` list is one `(start, end)` tuple per
character of its string.

ASCII without control characters skips all of it: cleaning, CJK spacing, NFC and accent stripping
change nothing there and lower() maps one character to one, so a token's span is its position.
"""
import re
import unicodedata

from npbert.tokenization.chars import CJK, PUNCT, REMOVED, SPACE, _KIND, char_kind, strip_accents


def nfc(text):
    return unicodedata.normalize("NFC", text)


def tokenize_with_spans(basic, text, never_split, ascii_shortcut=True):
    """`basic.tokenize(text)` with spans: [(token, spans), ...].

    basic: the BasicTokenizer whose options apply; never_split: a set (the tokenizer's own
    never_split already merged in).  `ascii_shortcut=False` runs the general code on ASCII too.
    """
    if ascii_shortcut and is_plain_ascii(text):
        return [(token, [(start + i, start + i + 1) for i in range(len(token))])
                for token, start in split_plain_ascii(basic, text, never_split)]
    tokens = []
    for raw_word, raw_spans in _clean_and_split(text, basic.tokenize_chinese_chars):
        word, spans = nfc_aligned(raw_word, raw_spans)
        steps = _word_steps(basic, word, never_split)
        for step in steps:
            word, spans = _ALIGNED[step](word, spans)
        if word and raw_word != nfc(raw_word):
            # NFC gave a composed character the span of all it was made of ("e" + U+0301 ->
            # "é").  If the steps applied to each raw character alone give the same word
            # (accents stripped again), use those finer spans: what was dropped covers nothing.
            spans = _spans_char_by_char(raw_word, raw_spans, word, steps) or spans
        # transformers re-splits " ".join(pieces) on whitespace; that only drops empty pieces (a
        # word that was nothing but accents): lower() and NFD never produce whitespace (a test
        # checks every character).
        tokens.extend(piece for piece in _split_on_punc(basic, word, spans, never_split) if piece[0])
    return tokens


def wordpieces_with_spans(basic, never_split, wordpiece, text, ascii_shortcut=True, words_out=None):
    """`text` (no special tokens in it) -> (tokens, spans): one (start, end) in `text` per token.
    With a list `words_out`, also appends to it the index (in `text`, from 0) of the word each
    token came from: a BasicTokenizer word, or with `basic=None` a whitespace-separated one.

    basic: the BasicTokenizer (None: do_basic_tokenize=False, the words are Python-whitespace
    runs); never_split: a set, basic.never_split and the special tokens; wordpiece: a word ->
    [(piece, start, end), ...] (`WordpieceTokenizer.tokenize_word`), run on every word that is not
    in basic.never_split (those stay whole, as in transformers' `BertTokenizer._tokenize`).
    """
    if basic is None:
        words = [(m.group(), m.start(), None) for m in _PYTHON_WORD.finditer(text)]
    elif ascii_shortcut and is_plain_ascii(text):
        # each character of an ASCII token is one character of `text`: a piece's span is its position
        words = [(word, start, None) for word, start in split_plain_ascii(basic, text, never_split)]
    else:
        words = [(word, None, spans) for word, spans in tokenize_with_spans(basic, text, never_split, False)]
    tokens, spans = [], []
    for w, (word, start, word_spans) in enumerate(words):
        pieces = [(word, 0, len(word))] if basic is not None and word in basic.never_split else wordpiece(word)
        for piece, a, b in pieces:
            tokens.append(piece)
            spans.append((start + a, start + b) if word_spans is None else (word_spans[a][0], word_spans[b - 1][1]))
        if words_out is not None:
            words_out += [w] * len(pieces)
    return tokens, spans


def _word_steps(basic, word, never_split):
    """What happens to one word: [], [str.lower], [str.lower, strip_accents] or [strip_accents]."""
    if word in never_split:
        return []
    if basic.do_lower_case:
        return [str.lower] if basic.strip_accents is False else [str.lower, strip_accents]
    return [strip_accents] if basic.strip_accents else []


def _clean_and_split(text, split_cjk):
    """Cleaning, CJK spacing and the whitespace split: [(word, spans), ...].

    NFC is left to the caller, word by word: NFC never composes across whitespace (whitespace
    characters are starters that take no marks) and never produces whitespace, so normalising
    each word gives the words of NFC of the whole text, then str.split().
    """
    words = []
    chars, spans = [], []
    for i, ch in enumerate(text):
        kind = _KIND.get(ch) or char_kind(ch)
        if kind is REMOVED:
            continue
        if kind is SPACE or (kind is CJK and split_cjk):
            if chars:
                words.append(("".join(chars), spans))
                chars, spans = [], []
            if kind is CJK:
                words.append((ch, [(i, i + 1)]))
        else:
            chars.append(ch)
            spans.append((i, i + 1))
    if chars:
        words.append(("".join(chars), spans))
    return words


def _split_on_punc(basic, word, spans, never_split):
    if not basic.do_split_on_punc or word in never_split:
        return [(word, spans)]
    pieces, start = [], 0
    for i, ch in enumerate(word):
        if (_KIND.get(ch) or char_kind(ch)) is PUNCT:
            if start < i:
                pieces.append((word[start:i], spans[start:i]))
            pieces.append((ch, spans[i : i + 1]))
            start = i + 1
    if start < len(word):
        pieces.append((word[start:], spans[start:]))
    return pieces


# ---------------------------------------------------------------------------
# ASCII shortcut
# ---------------------------------------------------------------------------

_ASCII_REMOVED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # ASCII control characters but \t \n \r
_ASCII_WORD = re.compile("[^\t\n\r ]+")
_ASCII_PIECE = re.compile("[0-9A-Za-z]+|.")  # a run of letters and digits, or one punctuation character
_PYTHON_WORD = re.compile(r"\S+")  # with do_basic_tokenize=False, WordPiece splits on Python whitespace only


def is_plain_ascii(text):
    """ASCII without control characters (\\t \\n \\r allowed)."""
    return text.isascii() and not _ASCII_REMOVED.search(text)


def split_plain_ascii(basic, text, never_split):
    """The BasicTokenizer on plain ASCII: [(token, start in text), ...]."""
    tokens = []
    for word_match in _ASCII_WORD.finditer(text):
        word, offset = word_match.group(), word_match.start()
        if word not in never_split and basic.do_lower_case:
            word = word.lower()
        if word in never_split or not basic.do_split_on_punc:
            tokens.append((word, offset))
        else:
            for piece in _ASCII_PIECE.findall(word):  # the pieces tile the word
                tokens.append((piece, offset))
                offset += len(piece)
    return tokens


# ---------------------------------------------------------------------------
# Alignment helpers: (string, spans) -> (new string, new spans)
# ---------------------------------------------------------------------------


def _whole_span(spans):
    return (spans[0][0], spans[-1][1])


def _realign(text, spans, new_text, units, transform, same_text_required):
    """Spans for `new_text`, the exact result of a transform applied to `text`.

    `units` partitions `text` into index ranges `(a, b)`.  If transforming each unit on its own
    gives pieces whose total length is that of `new_text` (and, when `same_text_required`, whose
    concatenation is `new_text`), every output character gets the span of the unit it came from
    (a unit the transform leaves unchanged keeps its characters' own spans).  Otherwise all of
    `new_text` gets the span of the whole of `text`.
    """
    pieces = [transform(text[a:b]) for a, b in units]
    if sum(len(p) for p in pieces) == len(new_text) and (
        not same_text_required or "".join(pieces) == new_text
    ):
        new_spans = []
        for (a, b), piece in zip(units, pieces):
            if piece == text[a:b]:  # unchanged: each character keeps its own span
                new_spans.extend(spans[a:b])
            else:
                new_spans.extend([(spans[a][0], spans[b - 1][1])] * len(piece))
        return new_spans
    return [_whole_span(spans)] * len(new_text)


def _char_units(text):
    return [(i, i + 1) for i in range(len(text))]


def _starter_units(text):
    """Split `text` before every starter (canonical combining class 0)."""
    cuts = [i for i in range(1, len(text)) if unicodedata.combining(text[i]) == 0]
    bounds = [0] + cuts + [len(text)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _nfc_units(text, normalized):
    """Ranges of `text` that NFC normalises independently of each other.

    Usually these are the starter units (a base character and its combining marks).  Two
    starters can still compose (Hangul L+V+T jamo, some Indic vowel signs); then only the cuts
    `b` with NFC(text[:b]) + NFC(text[b:]) == NFC(text) are kept (checked for words of moderate
    length only).
    """
    units = _starter_units(text)
    if "".join(nfc(text[a:b]) for a, b in units) == normalized or len(text) > 256:
        return units
    cuts = [a for a, _ in units[1:] if nfc(text[:a]) + nfc(text[a:]) == normalized]
    bounds = [0] + cuts + [len(text)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def nfc_aligned(text, spans):
    if unicodedata.is_normalized("NFC", text):
        return text, spans
    new = nfc(text)
    return new, _realign(text, spans, new, _nfc_units(text, new), nfc, True)


def lower_aligned(text, spans):
    new = text.lower()
    if len(new) == len(text):  # everything but U+0130 "İ" lowers one to one
        return new, spans
    # Whole-word lower() differs from per-character lower() only for the final sigma, which is
    # one character either way, so lengths always agree here.
    return new, _realign(text, spans, new, _char_units(text), str.lower, False)


def strip_accents_aligned(text, spans):
    if text.isascii():
        return text, spans
    new = strip_accents(text)
    if new == text:
        return text, spans
    # Per character, NFD + dropping Mn keeps the same characters as on the whole word; only
    # canonical reordering of kept non-starters can differ.
    return new, _realign(text, spans, new, _char_units(text), strip_accents, False)


_ALIGNED = {str.lower: lower_aligned, strip_accents: strip_accents_aligned}


def _spans_char_by_char(raw, raw_spans, word, steps):
    """Spans for `word` if NFC, then `steps`, applied to each character of `raw` alone give
    `word` again; else None."""
    pieces = []
    for ch in raw:
        piece = nfc(ch)
        for step in steps:
            piece = step(piece)
        pieces.append(piece)
    if "".join(pieces) != word:
        return None
    return [span for piece, span in zip(pieces, raw_spans) for _ in piece]
