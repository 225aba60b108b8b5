"""Every code point: npbert's character classes against transformers', and the
facts the single-pass tokenizer relies on."""
import sys
import unicodedata

import pytest

from npbert.tokenization.chars import (
    CJK, PUNCT, REMOVED, SEPARATOR_CHARS, SPACE, char_kind, is_chinese_char, is_control, is_punctuation,
    is_whitespace, strip_accents,
)

ALL_CHARS = [chr(cp) for cp in range(sys.maxunicode + 1)]


@pytest.mark.one_path  # character tables: no path involved
def test_character_classes_equal_transformers():
    pytest.importorskip("transformers")
    try:  # transformers 5.x
        import transformers.tokenization_python as tp
        from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
    except ImportError:  # transformers 4.x
        import transformers.tokenization_utils as tp
        from transformers.models.bert.tokenization_bert import BasicTokenizer

    reference_chinese = BasicTokenizer()._is_chinese_char
    for ch in ALL_CHARS:
        assert is_whitespace(ch) == tp._is_whitespace(ch), hex(ord(ch))
        assert is_control(ch) == tp._is_control(ch), hex(ord(ch))
        assert is_punctuation(ch) == tp._is_punctuation(ch), hex(ord(ch))
        assert is_chinese_char(ord(ch)) == reference_chinese(ord(ch)), hex(ord(ch))


@pytest.mark.one_path  # character tables: no path involved
def test_char_kind():
    for ch in ALL_CHARS:
        kind = char_kind(ch)
        removed = ch == "\x00" or ch == "\ufffd" or is_control(ch)
        assert (kind == REMOVED) == removed
        if not removed:
            assert (kind == SPACE) == ch.isspace()
            assert (kind == CJK) == (not ch.isspace() and is_chinese_char(ord(ch)))
            assert (kind == PUNCT) == (not ch.isspace() and not is_chinese_char(ord(ch)) and is_punctuation(ch))


@pytest.mark.one_path  # character tables: no path involved
def test_separators_are_the_whitespace_that_survives_cleaning():
    # str.split() splits the cleaned text on these; every other whitespace
    # character Python knows is a control character that cleaning deletes.
    survivors = {ch for ch in ALL_CHARS if ch.isspace() and not is_control(ch)}
    assert survivors == set(SEPARATOR_CHARS)
    assert {ch for ch in survivors if not is_whitespace(ch)} == {"\u2028", "\u2029"}


@pytest.mark.one_path  # character tables: no path involved
def test_normalisation_never_creates_whitespace_or_joins_across_it():
    for ch in ALL_CHARS:
        if ch.isspace() or is_control(ch):
            continue
        for produced in (unicodedata.normalize("NFC", ch), ch.lower(), strip_accents(ch), strip_accents(ch.lower())):
            assert not any(c.isspace() for c in produced), hex(ord(ch))
    # whitespace is NFC-inert next to anything, combining marks included
    for space in SEPARATOR_CHARS:
        for mark in ["\u0301", "\u0308", "\u093c", "\u3099", "\u1161"]:
            for text in [space + mark, "e" + space + mark, mark + space]:
                assert unicodedata.normalize("NFC", text).count(" ") == text.count(" ")
                assert unicodedata.normalize("NFC", text) == text or space in "\u2000\u2001"


@pytest.mark.one_path  # character tables: no path involved
def test_only_dotted_capital_i_changes_length_when_lowered():
    assert [ch for ch in ALL_CHARS if len(ch.lower()) != 1] == ["\u0130"]


# The class tests above compare each character class alone, and they all agreed while the
# tokenizer split "a\ufaffb" into "a", "b" (the Python tokenizer gives "ab"): U+FAFF is in a CJK
# range AND unassigned (a control character, deleted by cleaning before the CJK split).  What
# they missed is a code point in two classes at once, seen in context.  These check the classes
# the single-pass tokenizer cuts the text with, and every range end inside a word.

@pytest.mark.one_path  # character tables: no path involved
def test_the_tokenizers_cjk_class_is_exactly_the_kept_ideographs():
    from npbert.tokenization.fast import _CJK_CLASS
    import re

    cjk = re.compile(f"[{_CJK_CLASS}]")
    for ch in ALL_CHARS:
        assert bool(cjk.fullmatch(ch)) == (char_kind(ch) == CJK), hex(ord(ch))


def _range_end_chars():
    from npbert.tokenization.chars import CJK_RANGES

    ends = {cp for lo, hi in CJK_RANGES for cp in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1)}
    inside_removed = {cp for lo, hi in CJK_RANGES for cp in range(lo, hi + 1) if is_control(chr(cp))}
    return [chr(cp) for cp in sorted(ends | inside_removed)]


def test_cjk_range_ends_inside_a_word_equal_reference(minilm_dir, reference_class):
    from npbert.tokenization import BertTokenizer

    ours, theirs = BertTokenizer.from_pretrained(minilm_dir), reference_class.from_pretrained(minilm_dir)
    chars = _range_end_chars()
    assert "\ufaff" in chars and "\U0002b73f" in chars and "\U0002b81f" in chars
    for ch in chars:
        for text in (f"a{ch}b", f"{ch}b", f"a{ch}", f"x a{ch}b y", f"中{ch}文"):
            assert ours.tokenize(text) == theirs.tokenize(text), (hex(ord(ch)), text)
            assert ours.encode(text) == theirs.encode(text), (hex(ord(ch)), text)
