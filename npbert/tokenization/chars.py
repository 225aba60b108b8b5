"""What BERT's tokenizer thinks a character is: whitespace, control, punctuation, CJK ideograph.

The same tests as google-research/bert's `tokenization.py` (`_is_whitespace`, `_is_control`,
`_is_punctuation`, `BasicTokenizer._is_chinese_char`) and transformers'
`tokenization_python.py`; both paths of the tokenizer use them.  `tests/tokenization` checks each
against transformers' on every code point.
"""
import unicodedata

# The code-point ranges BERT calls "Chinese characters" (CJK Unified Ideographs, extensions A-E
# and the compatibility blocks), exactly those of google-research/bert and transformers.
# Hiragana, Katakana and Hangul are not among them.
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

# The characters str.split() splits on that survive cleaning: cleaning turns every whitespace
# character (\t, \n, \r, " ", category Zs) into " ", and U+2028 / U+2029 (categories Zl / Zp)
# are neither whitespace to BERT nor control characters, so they stay, and str.split() splits
# on them.  The other characters Python counts as whitespace (\x0b, \x0c, \x1c-\x1f, \x85) are
# control characters, which cleaning deletes: "a\x0bb" is the one word "ab".
# tests/tokenization checks this list against every code point.
SEPARATOR_CHARS = (
    "\t\n\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def is_whitespace(char):
    """\\t, \\n, \\r, " " and every category-Zs character (Google's `_is_whitespace`)."""
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    """Every category-C* character except \\t, \\n, \\r, which count as whitespace
    (Google's `_is_control`)."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def is_punctuation(char):
    """All non-letter, non-digit printable ASCII, plus every Unicode P* character
    (Google's `_is_punctuation`).  "^", "$", "`" are Unicode symbols, not punctuation, but BERT
    treats the whole ASCII symbol range as punctuation."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp):
    """True if code point `cp` is in one of BERT's CJK ideograph ranges
    (Google's `BasicTokenizer._is_chinese_char`)."""
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def strip_accents(text):
    """NFD, then drop every nonspacing mark (category Mn): "éß" -> "eß"
    (Google's `BasicTokenizer._run_strip_accents`)."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


# ---------------------------------------------------------------------------
# For the fast path: one classification per distinct character, remembered.
# ---------------------------------------------------------------------------

REMOVED, SPACE, CJK, PUNCT, OTHER = "removed", "space", "cjk", "punct", "other"
_KIND = {}


def char_kind(char):
    """What cleaning, CJK spacing, the whitespace split and the punctuation split do with
    `char`: REMOVED (NUL, U+FFFD, control), SPACE (str.split() splits there), CJK (a word of its
    own), PUNCT, or OTHER.  Decided once per distinct character (the tests above cost a few
    function calls each)."""
    kind = _KIND.get(char)
    if kind is None:
        if char == "\x00" or char == "\ufffd" or is_control(char):
            kind = REMOVED
        elif char.isspace():  # is_whitespace, plus U+2028 / U+2029, which str.split() splits on
            kind = SPACE
        elif is_chinese_char(ord(char)):
            kind = CJK
        elif is_punctuation(char):
            kind = PUNCT
        else:
            kind = OTHER
        _KIND[char] = kind
    return kind


def cjk_ranges_kept():
    """CJK_RANGES without the code points cleaning deletes (unassigned, category Cn):
    [(lo, hi), ...] inclusive.  Those never reach the CJK split, so they must not count as
    ideographs where the text is cut before cleaning (the fast path's single-pass regex)."""
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
