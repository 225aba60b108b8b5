"""BERT's BasicTokenizer: text -> words, the steps of google-research/bert's `tokenization.py`
and transformers' `BasicTokenizer`, under their names and in their order.

    text = self._clean_text(text)                    1. drop NUL, U+FFFD, control characters;
                                                        every whitespace character becomes " "
    text = self._tokenize_chinese_chars(text)        2. spaces around every CJK ideograph
    text = unicodedata.normalize("NFC", text)        3. (transformers only, not Google's)
    orig_tokens = whitespace_tokenize(text)          4. str.split()
    for token in orig_tokens:                        5. per word, unless it is in never_split:
        token = token.lower()                             lower-case       (do_lower_case)
        token = self._run_strip_accents(token)            NFD, drop Mn     (strip_accents)
        split_tokens += self._run_split_on_punc(token)    punctuation characters become words
    whitespace_tokenize(" ".join(split_tokens))      6. drop empty words

`strip_accents=None` follows `do_lower_case` (the original BERT: uncased models strip accents,
cased ones keep them); `True`/`False` force it either way.  Google's code has no NFC step and
always strips accents when lower-casing: `BasicTokenizer(strip_accents=None)` on NFC text is
Google's.

On the fast path (`npbert.get_path() == "fast"`, the default) `tokenize` returns the tokens of
`aligned.tokenize_with_spans`, the same steps carrying character spans, with an ASCII shortcut;
tests/tokenization checks both paths give the same tokens on random Unicode.
"""
import unicodedata

from npbert.paths import is_fast
from npbert.tokenization import aligned
from npbert.tokenization.chars import is_chinese_char, is_control, is_punctuation, is_whitespace


def whitespace_tokenize(text):
    """Strip, then split on runs of whitespace (Google's and transformers' `whitespace_tokenize`)."""
    text = text.strip()
    if not text:
        return []
    return text.split()


class BasicTokenizer:
    """Cleaning, CJK spacing, NFC, lower-casing, accent stripping, punctuation.

    Args:
        do_lower_case: lower-case every word not in `never_split`.
        never_split: words (after cleaning, CJK spacing and NFC) that are neither lower-cased,
            accent-stripped nor split on punctuation.
        tokenize_chinese_chars: every CJK ideograph becomes a word of its own.
        strip_accents: None (follow `do_lower_case`), True or False.
        do_split_on_punc: split punctuation off into words of their own.
    """

    def __init__(self, do_lower_case=True, never_split=None, tokenize_chinese_chars=True, strip_accents=None,
                 do_split_on_punc=True):
        self.do_lower_case = do_lower_case
        self.never_split = set(never_split) if never_split else set()
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.strip_accents = strip_accents
        self.do_split_on_punc = do_split_on_punc

    def tokenize(self, text, never_split=None):
        """Text -> list of words (strings); `never_split` adds to the tokenizer's own."""
        never_split = self.never_split.union(set(never_split)) if never_split else self.never_split
        if is_fast():
            return [token for token, _ in aligned.tokenize_with_spans(self, text, never_split)]
        text = self._clean_text(text)
        if self.tokenize_chinese_chars:
            text = self._tokenize_chinese_chars(text)
        text = unicodedata.normalize("NFC", text)     # composes "e" + U+0301 into "é"
        orig_tokens = whitespace_tokenize(text)
        split_tokens = []
        for token in orig_tokens:
            if token not in never_split:
                if self.do_lower_case:
                    token = token.lower()
                    if self.strip_accents is not False:
                        token = self._run_strip_accents(token)
                elif self.strip_accents:
                    token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token, never_split))
        return whitespace_tokenize(" ".join(split_tokens))

    def tokenize_with_spans(self, text, never_split=None):
        """Text -> [(token, spans), ...]; `spans[i]` is the (start, end) in `text` of the i-th
        character of `token` (see aligned.py)."""
        never_split = self.never_split.union(set(never_split)) if never_split else self.never_split
        return aligned.tokenize_with_spans(self, text, never_split)

    def _run_strip_accents(self, text):
        """NFD, then drop every nonspacing mark (category Mn): "héllo" -> "hello"."""
        text = unicodedata.normalize("NFD", text)
        output = []
        for char in text:
            if unicodedata.category(char) == "Mn":
                continue
            output.append(char)
        return "".join(output)

    def _run_split_on_punc(self, text, never_split=None):
        """Every punctuation character becomes a word of its own: "don't!" -> don ' t !"""
        if not self.do_split_on_punc or (never_split is not None and text in never_split):
            return [text]
        output = []
        start_new_word = True
        for char in text:
            if is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    def _tokenize_chinese_chars(self, text):
        """Adds whitespace around every CJK ideograph."""
        output = []
        for char in text:
            if self._is_chinese_char(ord(char)):
                output.append(" ")
                output.append(char)
                output.append(" ")
            else:
                output.append(char)
        return "".join(output)

    def _is_chinese_char(self, cp):
        """CJK Unified Ideographs and their extensions (not Hiragana, Katakana, Hangul)."""
        return is_chinese_char(cp)

    def _clean_text(self, text):
        """Drops NUL, U+FFFD and control characters; every whitespace character becomes " "."""
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or is_control(char):
                continue
            if is_whitespace(char):
                output.append(" ")
            else:
                output.append(char)
        return "".join(output)
