"""WordPiece: greedy longest-match-first over a vocabulary, with "##" continuations.

    "unaffable"    -> un ##aff ##able
    "124443286539" -> 124 ##44 ##32 ##86 ##53 ##9

From the start of the word, take the longest prefix that is in the vocabulary; then, from where
it ended, the longest "##"-prefixed piece; and so on.  If at some point no piece matches, the
whole word becomes the unknown token (not just the uncovered rest).  A word longer than
`max_input_chars_per_word` characters is the unknown token outright (transformers: 100;
Google's `tokenization.py`: 200).

`tokenize` is Google's and transformers' `WordpieceTokenizer.tokenize` line for line on the
reference path; on the fast path it runs `tokenize_word`, the same search bounded by the longest
vocabulary entry and returning the range of the word each piece covers (for offsets).
"""
from npbert.paths import is_fast
from npbert.tokenization.basic import whitespace_tokenize


class WordpieceTokenizer:
    """Args:
    vocab: dict token -> id (only membership is used).
    unk_token: the token for a word that cannot be covered (Google's default "[UNK]").
    max_input_chars_per_word: longer words become `unk_token` (transformers: 100).
    """

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=100):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No piece longer than the longest vocabulary entry can match, so the fast search for
        # the longest match never needs to look further ahead.
        self.max_piece_chars = max((len(t) for t in vocab), default=0)

    def tokenize(self, text):
        """Whitespace-separated words -> word pieces (strings)."""
        if is_fast():
            return [piece for word in text.split() for piece, _, _ in self.tokenize_word(word)]
        output_tokens = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue

            is_bad = False
            start = 0
            sub_tokens = []
            while start < len(chars):
                end = len(chars)
                cur_substr = None
                while start < end:               # the longest piece from `start` in the vocab
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:           # nothing fits here: the whole word is unknown
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end

            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens

    def tokenize_word(self, word):
        """One word (no whitespace) -> [(piece, start, end), ...], the pieces of `tokenize(word)`.

        `start:end` is the range of `word` each piece covers; the unknown token covers the whole
        word.  The search for the longest piece starts at most `max_piece_chars` ahead.
        """
        n = len(word)
        if n > self.max_input_chars_per_word:
            return [(self.unk_token, 0, n)]
        pieces = []
        start = 0
        while start < n:
            prefix = "##" if start > 0 else ""
            end = min(n, start + self.max_piece_chars)
            while end > start:
                piece = prefix + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:  # nothing in the vocabulary starts here
                return [(self.unk_token, 0, n)]
            pieces.append((piece, start, end))
            start = end
        return pieces
