"""BatchEncoding (the dict the tokenizer returns) and the small conversions around it."""
import re

import warnings

import numpy as np

from npbert.tokenization.alignment import CharSpan, TokenSpan
from npbert.tokenization.warn import warn

# transformers' "no limit" model_max_length, and the bound above which a model_max_length
# counts as "no limit".
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)

PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")
TRUNCATION_STRATEGIES = ("only_first", "only_second", "longest_first", "do_not_truncate")


class BatchEncoding(dict):
    """The dict `__call__` returns; keys are also attributes (`enc.input_ids`).

    On an encoding made by the tokenizer's `__call__`, the methods of transformers' fast
    (Rust) tokenizers' BatchEncoding map tokens to words, sequences and characters and back
    (alignment.py computes what they read, on first use).  Their arguments are transformers':
    `tokens(batch_index=0)`; `token_to_word(token_index)` for a single row or
    `token_to_word(batch_index, token_index)`; `word_to_tokens(word_index, sequence_index=0)` or
    `word_to_tokens(batch_index, word_index, sequence_index=0)`; and so on.  A batch or token
    index may be negative (counted from the end, as Python indexes); a token index past the row's
    end gives None, as in transformers.
    """

    _alignment = None

    @property
    def is_fast(self):
        """True when the fast-tokenizer methods below are available (transformers' meaning:
        the encoding carries its token/word/character alignment)."""
        return self._alignment is not None

    @property
    def n_sequences(self):
        """1 (single texts) or 2 (pairs); None for a dict built by hand or by pad()."""
        return None if self._alignment is None else self._alignment.n_sequences

    def _row(self, batch_index, method):
        alignment = self._alignment
        if alignment is None:
            raise ValueError(f"{method}() is available on encodings made by the tokenizer's __call__ "
                             "(not on a dict built by hand or by pad())")
        if not isinstance(batch_index, (int, np.integer)) or isinstance(batch_index, bool):
            raise TypeError(f"{method}(): the batch index must be an int, got {batch_index!r:.40}")
        n = len(alignment)
        b = int(batch_index) + n if batch_index < 0 else int(batch_index)
        if not 0 <= b < n:
            raise IndexError(f"{method}(batch_index={batch_index}): the encoding has {n} row(s)")
        ids = self["input_ids"]
        return alignment.row(b, ids if alignment.flat else ids[b])

    @staticmethod
    def _split(method, first, second):
        """transformers' (batch_or_x_index, x_index=None): one argument is the index in row 0."""
        return (0, first) if second is None else (first, second)

    def _token(self, method, batch_or_token_index, token_index):
        b, t = self._split(method, batch_or_token_index, token_index)
        row = self._row(b, method)
        _check_int(method, "token_index", t)
        t = t + len(row.ids) if t < 0 else t
        return row, (t if 0 <= t < len(row.ids) else None)

    def _offsets(self, row, method):
        if not row.why:
            return row.offsets
        raise ValueError(f"{method}(): {row.why}")

    def tokens(self, batch_index=0):
        """The tokens (strings) of row `batch_index`, [CLS], [SEP] and [PAD] included."""
        return list(self._row(batch_index, "tokens").tokens)

    def word_ids(self, batch_index=0):
        """The index of each token's word (None for [CLS], [SEP], padding); counted from 0 in
        each sequence of a pair."""
        return list(self._row(batch_index, "word_ids").words)

    def words(self, batch_index=0):
        """`word_ids(batch_index)` under its older name (transformers 4.x, deprecated there)."""
        warnings.warn("BatchEncoding.words() is word_ids() under its older name; use word_ids()", FutureWarning,
                      stacklevel=2)
        return self.word_ids(batch_index)

    def sequence_ids(self, batch_index=0):
        """0 for the tokens of the first text, 1 for the second's, None for [CLS], [SEP], padding."""
        return list(self._row(batch_index, "sequence_ids").sequences)

    def token_to_sequence(self, batch_or_token_index, token_index=None):
        row, t = self._token("token_to_sequence", batch_or_token_index, token_index)
        return None if t is None else row.sequences[t]

    def token_to_word(self, batch_or_token_index, token_index=None):
        """The word of a token (None for [CLS], [SEP], padding, or past the row's end)."""
        row, t = self._token("token_to_word", batch_or_token_index, token_index)
        return None if t is None else row.words[t]

    def token_to_chars(self, batch_or_token_index, token_index=None):
        """CharSpan(start, end) of a token in its text; None for [CLS], [SEP], padding."""
        row, t = self._token("token_to_chars", batch_or_token_index, token_index)
        offsets = self._offsets(row, "token_to_chars")
        return None if t is None or row.sequences[t] is None else CharSpan(*offsets[t])

    def word_to_tokens(self, batch_or_word_index, word_index=None, sequence_index=0):
        """TokenSpan(start, end) of the tokens of word `word_index` of sequence `sequence_index`;
        None if no token of the row comes from that word (truncated, or past the end)."""
        b, w = self._split("word_to_tokens", batch_or_word_index, word_index)
        row = self._row(b, "word_to_tokens")
        return _word_span(row, "word_to_tokens", w, sequence_index)

    def word_to_chars(self, batch_or_word_index, word_index=None, sequence_index=0):
        """CharSpan(start, end) of word `word_index` of sequence `sequence_index` in its text;
        None if no token of the row comes from that word (transformers fails there)."""
        b, w = self._split("word_to_chars", batch_or_word_index, word_index)
        row = self._row(b, "word_to_chars")
        offsets = self._offsets(row, "word_to_chars")
        span = _word_span(row, "word_to_chars", w, sequence_index)
        return None if span is None else CharSpan(offsets[span.start][0], offsets[span.end - 1][1])

    def char_to_token(self, batch_or_char_index, char_index=None, sequence_index=0):
        """The first token of sequence `sequence_index` whose characters include `char_index`;
        None for a character that belongs to no token (whitespace, a deleted character)."""
        b, c = self._split("char_to_token", batch_or_char_index, char_index)
        row = self._row(b, "char_to_token")
        return _char_token(row, "char_to_token", c, sequence_index, self._offsets(row, "char_to_token"))

    def char_to_word(self, batch_or_char_index, char_index=None, sequence_index=0):
        """The word of the token `char_to_token` finds; None where it finds none."""
        b, c = self._split("char_to_word", batch_or_char_index, char_index)
        row = self._row(b, "char_to_word")
        t = _char_token(row, "char_to_word", c, sequence_index, self._offsets(row, "char_to_word"))
        return None if t is None else row.words[t]

    def to(self, device, *, non_blocking=False):
        """`batch.to(device)` as tutorials write it: "cpu" (or torch.device("cpu")) returns this
        encoding unchanged, since npbert computes on the CPU with NumPy arrays; a GPU device is an
        error.  Anything that is not a device (a dtype) is ignored with a warning, as transformers does."""
        kind = device if isinstance(device, str) else getattr(device, "type", None)
        if isinstance(kind, str) and re.fullmatch(r"cpu(:\d+)?", kind):
            return self
        if isinstance(kind, str) or (isinstance(device, int) and not isinstance(device, bool)):
            raise RuntimeError(
                f"BatchEncoding.to({device!r}): npbert runs on the CPU only (NumPy); there is no {device!r} device. "
                "Use 'cpu' (tutorials' `\"cuda\" if torch.cuda.is_available() else \"cpu\"` picks it), or leave the "
                ".to(...) out.")
        warn(f"Attempting to cast a BatchEncoding to type {device}. This is not supported.")
        return self

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _check_int(method, name, value):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{method}(): {name} must be an int, got {value!r:.40}")


def _check_sequence(row, method, sequence_index):
    if sequence_index not in range(row.n_sequences):
        raise ValueError(f"{method}(): sequence_index={sequence_index!r}, but this row holds "
                         + ("one sequence (sequence_index=0)" if row.n_sequences == 1 else "a pair (0 or 1)"))


def _word_span(row, method, word_index, sequence_index):
    _check_int(method, "word_index", word_index)
    if word_index < 0:
        raise ValueError(f"{method}(): word_index must be >= 0, got {word_index}")
    _check_sequence(row, method, sequence_index)
    found = [i for i, (w, s) in enumerate(zip(row.words, row.sequences)) if w == word_index and s == sequence_index]
    return TokenSpan(found[0], found[-1] + 1) if found else None


def _char_token(row, method, char_index, sequence_index, offsets):
    _check_int(method, "char_index", char_index)
    if char_index < 0:
        raise ValueError(f"{method}(): char_index must be >= 0, got {char_index}")
    _check_sequence(row, method, sequence_index)
    for i, ((start, end), s) in enumerate(zip(offsets, row.sequences)):
        if s == sequence_index and start <= char_index < end:
            return i
    return None


def as_int64(value):
    """Lists (of lists) of ints -> np.int64 array, as transformers' "np" tensors.

    A ragged batch (rows of different lengths) is an error, as in transformers: an object array
    would only fail later, inside the model.
    """
    if value and isinstance(value[0], (list, tuple)) and len({len(v) for v in value}) > 1:
        raise ValueError(
            f"return_tensors='np' cannot stack rows of different lengths {sorted({len(v) for v in value})}: "
            "pass padding=True (and truncation=True for texts longer than the model's maximum) to "
            "get one (B, T) array")
    return np.asarray(value, dtype=np.int64)


def to_batch_encoding(encoded, return_tensors, batch_axis):
    """A dict of lists -> BatchEncoding; with return_tensors="np", int64 arrays (`batch_axis`:
    one example, given a leading axis of 1)."""
    if return_tensors == "np":
        encoded = {key: as_int64([value] if batch_axis else value) for key, value in encoded.items()}
    return BatchEncoding(encoded)


def to_python(ids):
    """NumPy arrays / scalars (or anything with .tolist()) -> Python ints and lists."""
    if hasattr(ids, "tolist"):
        return ids.tolist()
    if isinstance(ids, (list, tuple)):
        return [to_python(i) for i in ids]
    return ids
