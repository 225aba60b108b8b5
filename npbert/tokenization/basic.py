"""BERT's BasicTokenizer: cleaning, CJK spacing, NFC, lower-casing, accents, punctuation.

The steps, in the order google-research/bert and transformers run them on a text:

    1. clean        drop NUL, U+FFFD and control characters; every whitespace
                    character becomes " "
    2. CJK          put spaces around every CJK ideograph (`tokenize_chinese_chars`)
    3. NFC          unicodedata.normalize("NFC", text)  (transformers only)
    4. split        str.split() on whitespace
    5. per word, unless the word is in `never_split`:
         lower      word.lower()                       (`do_lower_case`)
         accents    NFD, then drop every `Mn` mark      (`strip_accents`, see below)
    6. punctuation  every punctuation character becomes a word of its own,
                    unless the (lower-cased) word is in `never_split`

`strip_accents=None` follows `do_lower_case` (the original BERT: uncased models
strip accents, cased ones keep them); `True`/`False` force it either way.

Every function here also carries *alignment*: for each character of the
current string, the `(start, end)` span of the original text it came from.
The strings themselves are always computed exactly as transformers computes
them (whole-word `lower()`, whole-word `normalize`); the spans are then
derived per character (or per group of characters, for NFC compositions)
and fall back to the whole word's span when no finer split reproduces the
exact string. That fallback only happens for rare sequences (decomposed
Hangul jamo, some Indic two-vowel compositions). When accent stripping undoes
what NFC composed ("e" + U+0301 -> "é" -> "e"), each remaining character keeps
the span of the one raw character it came from, and the dropped marks belong
to no token, as in transformers' Rust tokenizer.

A `Spans` list is one `(start, end)` tuple per character of its string.
"""

import re
import unicodedata

# The characters str.split() splits on that survive cleaning: cleaning turns every
# whitespace character (\t, \n, \r, " ", category Zs) into " ", and U+2028 / U+2029
# (categories Zl / Zp) are neither whitespace to BERT nor control characters, so
# they stay, and str.split() splits on them. The other characters Python counts as
# whitespace (\x0b, \x0c, \x1c-\x1f, \x85) are control characters, which cleaning
# deletes: "a\x0bb" is the one word "ab". tests/tokenization checks this list
# against every code point.
SEPARATOR_CHARS = (
    "\t\n\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# The code-point ranges BERT calls "Chinese characters" (CJK Unified Ideographs,
# extensions A-E and the compatibility blocks), exactly those of
# google-research/bert and transformers. Hiragana, Katakana and Hangul are not
# among them.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_chinese_char(cp):
    """True if code point `cp` is in one of BERT's CJK ideograph ranges."""
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def cjk_ranges_kept():
    """CJK_RANGES without the code points the cleaning deletes (unassigned, category Cn):
    [(lo, hi), ...] inclusive.  Those never reach the CJK split, so they must not count as
    ideographs where the text is cut before cleaning (the tokenizer's single-pass regex)."""
    kept = []
    for lo, hi in CJK_RANGES:
        start = None
        for cp in range(lo, hi + 2):
            ok = cp <= hi and not is_control(chr(cp))
            if ok and start is None:
                start = cp
            elif not ok and start is not None:
                kept.append((start, cp - 1))
                start = None
    return kept


def is_whitespace(ch):
    """\\t, \\n, \\r, " " and every category-Zs character."""
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    """Every category-C* character except \\t, \\n, \\r (those are whitespace)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_removed(ch):
    """Characters that cleaning deletes: NUL, U+FFFD and control characters."""
    return ch == "\x00" or ch == "\ufffd" or is_control(ch)


def is_punctuation(ch):
    """All non-letter, non-digit printable ASCII, plus every Unicode P* character.

    "^", "$", "`" and friends are not Unicode punctuation (they are symbols) but
    BERT treats the whole ASCII symbol range as punctuation.
    """
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


# What the tokenizer does with a character, decided once per distinct
# character and remembered (the checks above cost a few function calls each).
REMOVED, SPACE, CJK, PUNCT, OTHER = "removed", "space", "cjk", "punct", "other"
_KIND = {}


def char_kind(ch):
    kind = _KIND.get(ch)
    if kind is None:
        if is_removed(ch):
            kind = REMOVED
        elif ch.isspace():  # is_whitespace, plus U+2028 / U+2029, which str.split() splits on
            kind = SPACE
        elif is_chinese_char(ord(ch)):
            kind = CJK
        elif is_punctuation(ch):
            kind = PUNCT
        else:
            kind = OTHER
        _KIND[ch] = kind
    return kind


def strip_accents(text):
    """NFD, then drop every nonspacing mark (category Mn): "éß" -> "eß"."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def nfc(text):
    return unicodedata.normalize("NFC", text)


# ---------------------------------------------------------------------------
# Alignment helpers: (string, spans) -> (new string, new spans)
# ---------------------------------------------------------------------------


def _whole_span(spans):
    return (spans[0][0], spans[-1][1])


def _realign(text, spans, new_text, units, transform, same_text_required):
    """Spans for `new_text`, the exact result of a transform applied to `text`.

    `units` partitions `text` into index ranges `(a, b)`. If transforming each
    unit on its own gives pieces whose total length is that of `new_text` (and,
    when `same_text_required`, whose concatenation is `new_text`), every output
    character gets the span of the unit it came from (a unit the transform
    leaves unchanged keeps its characters' own spans). Otherwise all of
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

    Usually these are the starter units (a base character and its combining
    marks). Two starters can still compose (Hangul L+V+T jamo, some Indic
    vowel signs); then only the cuts `b` with NFC(text[:b]) + NFC(text[b:]) ==
    NFC(text) are kept (checked for words of moderate length only).
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
    # Whole-word lower() differs from per-character lower() only for the final
    # sigma, which is one character either way, so lengths always agree here.
    return new, _realign(text, spans, new, _char_units(text), str.lower, False)


def strip_accents_aligned(text, spans):
    if text.isascii():
        return text, spans
    new = strip_accents(text)
    if new == text:
        return text, spans
    # Per character, NFD + dropping Mn keeps the same characters as on the
    # whole word; only canonical reordering of kept non-starters can differ.
    return new, _realign(text, spans, new, _char_units(text), strip_accents, False)


_ALIGNED = {str.lower: lower_aligned, strip_accents: strip_accents_aligned}


def _spans_char_by_char(raw, raw_spans, word, steps):
    """Spans for `word` if NFC, then `steps`, applied to each character of `raw`
    alone give `word` again; else None."""
    pieces = []
    for ch in raw:
        piece = nfc(ch)
        for step in steps:
            piece = step(piece)
        pieces.append(piece)
    if "".join(pieces) != word:
        return None
    return [span for piece, span in zip(pieces, raw_spans) for _ in piece]


class BasicTokenizer:
    """Cleaning, CJK spacing, NFC, lower-casing, accent stripping, punctuation.

    Equal to transformers' `BasicTokenizer` (models/bert/tokenization_bert*.py)
    for every option; `tokenize_with_spans` adds the character span of every
    token in the input text.

    Args:
        do_lower_case: lower-case every word not in `never_split`.
        never_split: words (after cleaning, CJK spacing and NFC) that are neither
            lower-cased, accent-stripped nor split on punctuation.
        tokenize_chinese_chars: every CJK ideograph becomes a word of its own.
        strip_accents: None (follow `do_lower_case`), True or False.
        do_split_on_punc: split punctuation off into words of their own.
    """

    def __init__(
        self,
        do_lower_case=True,
        never_split=None,
        tokenize_chinese_chars=True,
        strip_accents=None,
        do_split_on_punc=True,
    ):
        self.do_lower_case = do_lower_case
        self.never_split = set(never_split) if never_split else set()
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.strip_accents = strip_accents
        self.do_split_on_punc = do_split_on_punc

    def tokenize(self, text, never_split=None):
        """Text -> list of basic tokens (strings)."""
        return [token for token, _ in self.tokenize_with_spans(text, never_split)]

    def tokenize_with_spans(self, text, never_split=None):
        """Text -> [(token, spans), ...]; `spans[i]` is the (start, end) in `text`
        of the i-th character of `token`."""
        never_split = self.never_split.union(never_split) if never_split else self.never_split
        if self.is_plain_ascii(text):
            return self._tokenize_plain_ascii(text, never_split)
        tokens = []
        for raw_word, raw_spans in self._clean_and_split(text):
            word, spans = nfc_aligned(raw_word, raw_spans)
            steps = self._word_steps(word, never_split)
            for step in steps:
                word, spans = _ALIGNED[step](word, spans)
            if word and raw_word != nfc(raw_word):
                # NFC gave a composed character the span of all it was made
                # of ("e" + U+0301 -> "é"). If the steps applied to each raw
                # character alone give the same word (accents stripped again),
                # use those finer spans: what was dropped covers nothing.
                spans = _spans_char_by_char(raw_word, raw_spans, word, steps) or spans
            # transformers re-splits " ".join(pieces) on whitespace; that only
            # drops empty pieces (a word that was nothing but accents): lower()
            # and NFD never produce whitespace (a test checks every character).
            tokens.extend(piece for piece in self._split_on_punc(word, spans, never_split) if piece[0])
        return tokens

    def _word_steps(self, word, never_split):
        """Step 5 for one word: [], [str.lower], [str.lower, strip_accents] or [strip_accents]."""
        if word in never_split:
            return []
        if self.do_lower_case:
            return [str.lower] if self.strip_accents is False else [str.lower, strip_accents]
        return [strip_accents] if self.strip_accents else []

    def _tokenize_plain_ascii(self, text, never_split):
        return [
            (token, [(start + i, start + i + 1) for i in range(len(token))])
            for token, start in self.split_plain_ascii(text, never_split)
        ]

    def split_plain_ascii(self, text, never_split):
        """The same steps for ASCII text without control characters, where
        cleaning, CJK spacing, NFC and accent stripping change nothing and
        lower() maps one character to one: [(token, start in text), ...]."""
        tokens = []
        for word_match in _ASCII_WORD.finditer(text):
            word, offset = word_match.group(), word_match.start()
            if word not in never_split and self.do_lower_case:
                word = word.lower()
            if word in never_split or not self.do_split_on_punc:
                tokens.append((word, offset))
            else:
                for piece in _ASCII_PIECE.findall(word):  # the pieces tile the word
                    tokens.append((piece, offset))
                    offset += len(piece)
        return tokens

    @staticmethod
    def is_plain_ascii(text):
        """ASCII without control characters (\\t \\n \\r allowed)."""
        return text.isascii() and not _ASCII_REMOVED.search(text)

    def _clean_and_split(self, text):
        """Steps 1, 2, 4: [(word, spans), ...] after cleaning, CJK spacing and split.

        NFC (step 3) is left to the caller, word by word: NFC never composes
        across whitespace (whitespace characters are starters that take no
        marks) and never produces whitespace, so normalising each word gives
        the words of transformers' NFC of the whole text, then str.split().
        """
        words = []
        chars, spans = [], []
        split_cjk = self.tokenize_chinese_chars
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

    def _split_on_punc(self, word, spans, never_split):
        if not self.do_split_on_punc or word in never_split:
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


_ASCII_REMOVED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # ASCII control characters but \t \n \r
_ASCII_WORD = re.compile("[^\t\n\r ]+")
_ASCII_PIECE = re.compile("[0-9A-Za-z]+|.")  # a run of letters and digits, or one punctuation character
