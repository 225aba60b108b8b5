"""The tokenizer's fast path: one regex pass over the text, a cache per raw word.

Computes what the reference path computes (`BertTokenizer.tokenize`: special tokens cut out, then
`BasicTokenizer.tokenize` and `WordpieceTokenizer.tokenize` on the rest; tests/tokenization
checks tokens, ids and offsets equal on random Unicode), plus every token's character span:

    text --cut at special tokens typed in it ("[SEP]" stays whole)-->
         --one regex: the raw words (runs of non-separator characters; with
           tokenize_chinese_chars every CJK ideograph is a raw word of its own)-->
         --per distinct raw word, once: aligned.tokenize_with_spans, then WordPiece-->
           cached (tokens, ids, spans relative to the word)

Processing raw words one by one gives the same tokens as processing the whole text because every
BasicTokenizer step before the whitespace split works per character (cleaning, CJK spacing) or
cannot reach across whitespace (NFC).  Running text then costs about one dict lookup per word.
"""
import re

from npbert.tokenization import aligned
from npbert.tokenization.chars import SEPARATOR_CHARS, cjk_ranges_kept

# A raw word: a maximal run of characters that are not whitespace after cleaning.
_RAW_WORD = re.compile(f"[^{SEPARATOR_CHARS}]+")
# With tokenize_chinese_chars, every CJK ideograph is a raw word of its own too (the
# BasicTokenizer puts spaces around it), so Chinese text, written without spaces, is looked up one
# character at a time instead of one sentence at a time.  Only the ideographs the BasicTokenizer
# keeps: a code point of a CJK range that is unassigned in Python's Unicode tables (category Cn,
# e.g. U+FAFF, U+2B73F) is a control character, deleted by the cleaning BEFORE the CJK split, so
# "a\ufaffb" is the word "ab"; cutting it out as a word of its own would give "a", "b".
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" if lo < hi else chr(lo) for lo, hi in cjk_ranges_kept())
_RAW_WORD_OR_CJK = re.compile(f"[{_CJK_CLASS}]|[^{SEPARATOR_CHARS}{_CJK_CLASS}]+")
# With do_basic_tokenize=False, WordPiece splits on Python whitespace only.
_PYTHON_WORD = re.compile(r"\S+")

_WORD_CACHE_LIMIT = 100_000  # distinct raw words kept (about 100 MB) before the caches are cleared


class FastTextEncoder:
    """Text -> (ids, offsets) for one BertTokenizer, with its caches.

    The caches assume the tokenizer's options do not change after construction (as
    transformers' Rust tokenizer fixes them when it is built).
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.word_cache = {}  # raw word -> (tokens, ids, spans relative to the word)
        self.wordpiece_cache = {}  # basic token -> [(piece, start, end), ...]

    def word_re(self):
        tok = self.tokenizer
        if not tok.do_basic_tokenize:
            return _PYTHON_WORD
        return _RAW_WORD_OR_CJK if tok.basic_tokenizer.tokenize_chinese_chars else _RAW_WORD

    def tokenize(self, text):
        """Text -> WordPiece tokens, special tokens typed in the text kept whole."""
        tokens = []
        word_re = self.word_re()
        for start, end, special in self.tokenizer._segments(text):
            if special is not None:
                tokens.append(special)
                continue
            for raw in word_re.findall(text, start, end):
                tokens.extend(self.analyse(raw)[0])
        return tokens

    def encode(self, text, with_offsets):
        """One text -> (ids, offsets or None), no special tokens added."""
        ids = []
        offsets = [] if with_offsets else None
        analyse, cache, word_re = self.analyse, self.word_cache, self.word_re()
        vocab = self.tokenizer.vocab
        for start, end, special in self.tokenizer._segments(text):
            if special is not None:
                ids.append(self.tokenizer._segment_ids[special])
                if with_offsets:
                    offsets.append((start, end))
            elif not with_offsets:
                for raw in word_re.findall(text, start, end):
                    entry = cache.get(raw) or analyse(raw)
                    ids += entry[1]
            else:
                for m in word_re.finditer(text, start, end):
                    _, word_ids, spans = analyse(m.group())
                    base = m.start()
                    ids += word_ids
                    offsets += [(base + s, base + e) for s, e in spans]
        return ids, offsets

    def analyse(self, raw):
        """One raw word -> (tokens, ids, spans), cached; spans relative to `raw`."""
        cached = self.word_cache.get(raw)
        if cached is not None:
            return cached
        tok = self.tokenizer
        basic = tok.basic_tokenizer if tok.do_basic_tokenize else None
        tokens, spans = aligned.wordpieces_with_spans(basic, tok._never_split, self._wordpiece, raw)
        ids = tuple(tok.vocab.get(t, tok._unk_id) for t in tokens)
        result = (tuple(tokens), ids, tuple(spans))
        if len(self.word_cache) >= _WORD_CACHE_LIMIT:
            self.word_cache.clear()
            self.wordpiece_cache.clear()
        self.word_cache[raw] = result
        return result

    def _wordpiece(self, word):
        """WordPiece of one basic token, cached: [(piece, start, end), ...]."""
        pieces = self.wordpiece_cache.get(word)
        if pieces is None:
            pieces = self.wordpiece_cache[word] = self.tokenizer.wordpiece_tokenizer.tokenize_word(word)
        return pieces
