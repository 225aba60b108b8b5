"""BertTokenizer: text -> input_ids, token_type_ids, attention_mask (and offsets).

Equal, output for output, to transformers' pure-Python BERT tokenizer
(`BertTokenizerLegacy` in transformers 5.x, `BertTokenizer` in 4.x) for the
same vocabulary and options; see docs/tokenizer.md for a walk-through.

    text --split out special tokens ("[SEP]" typed in the text stays whole)-->
         --split on whitespace--> raw words
         --per raw word, cached: BasicTokenizer, then WordPiece--> token ids + spans
         --[CLS] A [SEP] (B [SEP]), truncate, pad--> BatchEncoding

The one pass over the text is a regular expression that finds the raw words
(maximal runs of non-separator characters, see `basic.SEPARATOR_CHARS`). Each
distinct raw word ("Hello," "world.") is analysed once, by the exact
BasicTokenizer + WordPiece, and the result (token strings, ids, and character
spans relative to the word) is cached, so running text costs one dict lookup
per word. Processing raw words one by one gives the same tokens as processing
the whole text because every step before the whitespace split works per
character (cleaning, CJK spacing) or cannot reach across whitespace (NFC).

Where transformers' Python tokenizer silently returns a sequence longer than
`max_length` (max_length smaller than the special tokens, or `only_first` /
`only_second` asked to remove more tokens than that sequence has), npbert
raises a ValueError instead, as transformers' Rust tokenizer does.
"""

import json
import logging
import os
import re
import warnings

import numpy as np

from npbert.tokenization.basic import CJK_RANGES, SEPARATOR_CHARS, BasicTokenizer
from npbert.tokenization.wordpiece import WordpieceTokenizer

logger = logging.getLogger(__name__)

VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

# transformers' "no limit" model_max_length, and the bound above which a
# model_max_length counts as "no limit".
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)

SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")
TRUNCATION_STRATEGIES = ("only_first", "only_second", "longest_first", "do_not_truncate")

# A raw word: a maximal run of characters that are not whitespace after cleaning.
_RAW_WORD = re.compile(f"[^{SEPARATOR_CHARS}]+")
# With tokenize_chinese_chars, every CJK ideograph is a raw word of its own too
# (the BasicTokenizer puts spaces around it), so Chinese text, written without
# spaces, is looked up one character at a time instead of one sentence at a time.
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
_RAW_WORD_OR_CJK = re.compile(f"[{_CJK_CLASS}]|[^{SEPARATOR_CHARS}{_CJK_CLASS}]+")
# With do_basic_tokenize=False, WordPiece splits on Python whitespace only.
_PYTHON_WORD = re.compile(r"\S+")

_WORD_CACHE_LIMIT = 100_000  # distinct raw words kept (about 100 MB) before the caches are cleared


def load_vocab(vocab_file):
    """vocab.txt -> dict token -> id (the line number), as transformers reads it.

    Lines end at "\\n", "\\r\\n" or "\\r" (universal newlines); only the "\\n" is
    removed, so a token keeps any other trailing whitespace. A repeated token
    keeps the id of its last line.
    """
    if not os.path.isfile(vocab_file):
        raise ValueError(f"Can't find a vocabulary file at path '{vocab_file}'.")
    with open(vocab_file, "r", encoding="utf-8") as reader:
        lines = reader.readlines()
    if not lines:
        raise ValueError(f"The vocabulary file '{vocab_file}' is empty.")
    vocab = {}
    for index, line in enumerate(lines):
        vocab[line.rstrip("\n")] = index
    return vocab


class BatchEncoding(dict):
    """The dict `__call__` returns; keys are also attributes (`enc.input_ids`)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _as_int64(value, key="input_ids"):
    """Lists (of lists) of ints -> np.int64 array, as transformers' "np" tensors.

    A ragged batch (sequences of different lengths, no padding) cannot be one array: an error
    that says to pad, as transformers raises (a model would only fail later on dtype object).
    """
    if value and isinstance(value[0], (list, tuple)) and len({len(v) for v in value}) > 1:
        lengths = sorted({len(v) for v in value})
        raise ValueError(f"Unable to create a NumPy array of {key!r}: the sequences have different lengths "
                         f"({lengths[0]}..{lengths[-1]}). Pass padding=True (and truncation=True) to have "
                         "batched arrays of one length.")
    return np.asarray(value, dtype=np.int64)


class BertTokenizer:
    """BERT's tokenizer: BasicTokenizer + WordPiece + the encoding interface.

    Args:
        vocab_file: path to vocab.txt (one token per line, id = line number).
        do_lower_case: lower-case (and, unless `strip_accents=False`, strip
            accents from) the text.
        never_split: words kept whole and unchanged by the BasicTokenizer.
        tokenize_chinese_chars: split CJK ideographs into words of their own.
        strip_accents: None (follow `do_lower_case`), True or False.
        unk_token, sep_token, pad_token, cls_token, mask_token: special tokens;
            each must be in the vocabulary (pad_token and mask_token may be None).
        **kwargs: `do_basic_tokenize`, `model_max_length`, `padding_side`,
            `truncation_side`, `clean_up_tokenization_spaces`,
            `model_input_names`, `additional_special_tokens`,
            `max_input_chars_per_word`, as transformers.
    """

    def __init__(
        self,
        vocab_file,
        do_lower_case=True,
        never_split=None,
        tokenize_chinese_chars=True,
        strip_accents=None,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        **kwargs,
    ):
        self.vocab = load_vocab(vocab_file)
        self.ids_to_tokens = {i: t for t, i in self.vocab.items()}
        self.do_basic_tokenize = kwargs.pop("do_basic_tokenize", True)
        self.basic_tokenizer = BasicTokenizer(
            do_lower_case=do_lower_case,
            never_split=never_split,
            tokenize_chinese_chars=tokenize_chinese_chars,
            strip_accents=strip_accents,
        )
        self.wordpiece_tokenizer = WordpieceTokenizer(
            vocab=self.vocab,
            unk_token=str(unk_token),
            max_input_chars_per_word=kwargs.pop("max_input_chars_per_word", 100),
        )

        self.unk_token, self.sep_token, self.pad_token = unk_token, sep_token, pad_token
        self.cls_token, self.mask_token = cls_token, mask_token
        extra = kwargs.pop("additional_special_tokens", None) or kwargs.pop("extra_special_tokens", None) or []
        self.additional_special_tokens = [str(t) for t in extra]
        missing = [t for t in self.all_special_tokens if t not in self.vocab]
        for name in ("unk_token", "sep_token", "cls_token"):
            if getattr(self, name) is None:
                raise ValueError(f"BertTokenizer needs a {name}; got None.")
        if missing:
            raise ValueError(
                f"The vocabulary '{vocab_file}' lacks the special token(s) {missing}. BERT's special tokens "
                "must be vocabulary entries; pass the names this vocabulary uses (e.g. unk_token='<unk>')."
            )

        model_max_length = kwargs.pop("model_max_length", kwargs.pop("max_len", None))
        self.model_max_length = VERY_LARGE_INTEGER if model_max_length is None else model_max_length
        self.padding_side = kwargs.pop("padding_side", "right")
        self.truncation_side = kwargs.pop("truncation_side", "right")
        for name in ("padding_side", "truncation_side"):
            if getattr(self, name) not in ("right", "left"):
                raise ValueError(f"{name} should be 'right' or 'left', got {getattr(self, name)!r}")
        # token_type_ids by default, as transformers' BertTokenizer (4.x Python and the Rust one):
        # a pair then marks segment B without being asked
        self.model_input_names = list(kwargs.pop("model_input_names", ["input_ids", "token_type_ids", "attention_mask"]))
        self.clean_up_tokenization_spaces = kwargs.pop("clean_up_tokenization_spaces", True)
        self.pad_token_type_id = 0
        if kwargs:
            raise TypeError(f"BertTokenizer got unexpected arguments {sorted(kwargs)}")
        self._init_config = {
            "do_lower_case": do_lower_case,
            "do_basic_tokenize": self.do_basic_tokenize,
            "never_split": list(never_split) if never_split is not None else None,
            "tokenize_chinese_chars": tokenize_chinese_chars,
            "strip_accents": strip_accents,
        }

        # The text is first cut at special tokens written in it: longest first,
        # matched on the raw text (transformers' added-tokens trie does the same).
        specials = sorted((t for t in self.all_special_tokens if t), key=len, reverse=True)
        self._special_token_re = re.compile("|".join(re.escape(t) for t in specials))
        self._special_first_chars = {t[0] for t in specials}
        # The BasicTokenizer never splits special tokens (transformers passes
        # them as `never_split` when it tokenizes the text between them).
        self._never_split = self.basic_tokenizer.never_split | set(self.all_special_tokens)
        self._unk_id = self.vocab[str(unk_token)]
        self._word_cache = {}  # raw word -> (tokens, ids, spans relative to the word)
        self._wordpiece_cache = {}  # basic token -> [(piece, start, end), ...]
        self._cls_id, self._sep_id = self.vocab[str(cls_token)], self.vocab[str(sep_token)]
        self._warned_too_long = False

    # ------------------------------------------------------------------
    # Vocabulary and special tokens
    # ------------------------------------------------------------------

    @property
    def do_lower_case(self):
        return self.basic_tokenizer.do_lower_case

    @property
    def vocab_size(self):
        return len(self.vocab)

    def __len__(self):
        return len(self.vocab)

    def get_vocab(self):
        return dict(self.vocab)

    @property
    def all_special_tokens(self):
        """[unk, sep, pad, cls, mask] (those not None), then additional ones, unique."""
        tokens = []
        for name in SPECIAL_TOKEN_NAMES:
            token = getattr(self, name)
            if token is not None and str(token) not in tokens:
                tokens.append(str(token))
        tokens += [t for t in self.additional_special_tokens if t not in tokens]
        return tokens

    @property
    def all_special_ids(self):
        return self.convert_tokens_to_ids(self.all_special_tokens)

    @property
    def special_tokens_map(self):
        return {name: str(getattr(self, name)) for name in SPECIAL_TOKEN_NAMES if getattr(self, name) is not None}

    def _token_id(self, name):
        token = getattr(self, name)
        return None if token is None else self.vocab.get(str(token), self._unk_id)

    unk_token_id = property(lambda self: self._token_id("unk_token"))
    sep_token_id = property(lambda self: self._token_id("sep_token"))
    pad_token_id = property(lambda self: self._token_id("pad_token"))
    cls_token_id = property(lambda self: self._token_id("cls_token"))
    mask_token_id = property(lambda self: self._token_id("mask_token"))

    def convert_tokens_to_ids(self, tokens):
        """A token or a list of tokens -> id(s); unknown tokens -> unk_token_id."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self._unk_id)
        return [self.vocab.get(token, self._unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        """An id or a list of ids -> token(s); unknown ids -> unk_token."""
        if isinstance(ids, (int, np.integer)):
            return self.ids_to_tokens.get(int(ids), str(self.unk_token))
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [
            self.ids_to_tokens.get(int(i), str(self.unk_token)) for i in ids if int(i) not in skip
        ]

    def num_special_tokens_to_add(self, pair=False):
        return 3 if pair else 2

    @property
    def max_len_single_sentence(self):
        return self.model_max_length - 2

    @property
    def max_len_sentences_pair(self):
        return self.model_max_length - 3

    # ------------------------------------------------------------------
    # Text -> tokens
    # ------------------------------------------------------------------

    def tokenize(self, text):
        """Text -> list of WordPiece tokens (no [CLS]/[SEP] added)."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}")
        tokens = []
        for start, end, special in self._segments(text):
            if special is not None:
                tokens.append(special)
                continue
            for raw in self._word_re.findall(text, start, end):
                tokens.extend(self._analyse(raw)[0])
        return tokens

    @property
    def _word_re(self):
        if not self.do_basic_tokenize:
            return _PYTHON_WORD
        return _RAW_WORD_OR_CJK if self.basic_tokenizer.tokenize_chinese_chars else _RAW_WORD

    def _segments(self, text):
        """Cut `text` at special tokens: [(start, end, special_token_or_None), ...]."""
        if not any(ch in text for ch in self._special_first_chars):
            return [(0, len(text), None)]  # BERT's usual special tokens all start with "["
        segments, start = [], 0
        for m in self._special_token_re.finditer(text):
            if start < m.start():
                segments.append((start, m.start(), None))
            segments.append((m.start(), m.end(), m.group()))
            start = m.end()
        if start < len(text):
            segments.append((start, len(text), None))
        return segments

    def _analyse(self, raw):
        """One raw word -> (tokens, ids, spans), cached; spans relative to `raw`."""
        cached = self._word_cache.get(raw)
        if cached is not None:
            return cached
        tokens, spans = [], []
        basic = self.basic_tokenizer
        if not self.do_basic_tokenize:
            words = [(raw, 0, [(i, i + 1) for i in range(len(raw))])]
        elif basic.is_plain_ascii(raw):
            # Fast path: each character of an ASCII token is one character of
            # `raw`, so a piece's span is its position; no per-character spans.
            words = [(word, start, None) for word, start in basic.split_plain_ascii(raw, self._never_split)]
        else:
            words = [(word, None, word_spans) for word, word_spans in basic.tokenize_with_spans(raw, self._never_split)]
        for word, start, word_spans in words:
            if word in basic.never_split and self.do_basic_tokenize:
                pieces = [(word, 0, len(word))]  # a user's never_split word: kept as it is
            else:
                pieces = self._wordpiece_cache.get(word) or self._wordpiece(word)
            for piece, a, b in pieces:
                tokens.append(piece)
                spans.append((start + a, start + b) if word_spans is None else (word_spans[a][0], word_spans[b - 1][1]))
        ids = tuple(self.vocab.get(t, self._unk_id) for t in tokens)
        result = (tuple(tokens), ids, tuple(spans))
        if len(self._word_cache) >= _WORD_CACHE_LIMIT:
            self._word_cache.clear()
            self._wordpiece_cache.clear()
        self._word_cache[raw] = result
        return result

    def _wordpiece(self, word):
        """WordPiece of one basic token, cached: [(piece, start, end), ...]."""
        pieces = self.wordpiece_tokenizer.tokenize_word(word)
        self._wordpiece_cache[word] = pieces
        return pieces

    def _encode_text(self, text, with_offsets):
        """One text -> (ids, offsets or None), no special tokens added."""
        ids = []
        offsets = [] if with_offsets else None
        analyse, cache = self._analyse, self._word_cache
        for start, end, special in self._segments(text):
            if special is not None:
                ids.append(self.vocab[special])
                if with_offsets:
                    offsets.append((start, end))
            elif not with_offsets:
                for raw in self._word_re.findall(text, start, end):
                    entry = cache.get(raw) or analyse(raw)
                    ids += entry[1]
            else:
                for m in self._word_re.finditer(text, start, end):
                    _, word_ids, spans = analyse(m.group())
                    base = m.start()
                    ids += word_ids
                    offsets += [(base + s, base + e) for s, e in spans]
        return ids, offsets

    # ------------------------------------------------------------------
    # Special tokens around sequences
    # ------------------------------------------------------------------

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        """[CLS] A [SEP]  or  [CLS] A [SEP] B [SEP]."""
        cls, sep = [self._cls_id], [self._sep_id]
        if token_ids_1 is None:
            return cls + list(token_ids_0) + sep
        return cls + list(token_ids_0) + sep + list(token_ids_1) + sep

    def create_token_type_ids_from_sequences(self, token_ids_0, token_ids_1=None):
        """0 for [CLS] A [SEP], 1 for B [SEP]."""
        first = [0] * (len(token_ids_0) + 2)
        if token_ids_1 is None:
            return first
        return first + [1] * (len(token_ids_1) + 1)

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        """1 where build_inputs_with_special_tokens puts a special token, else 0.

        With `already_has_special_tokens=True`, `token_ids_0` is a finished
        sequence and every id of a special token is marked.
        """
        if already_has_special_tokens:
            if token_ids_1 is not None:
                raise ValueError(
                    "You should not supply a second sequence if the provided sequence of ids is already "
                    "formatted with special tokens for the model."
                )
            special = set(self.all_special_ids)
            return [1 if int(i) in special else 0 for i in token_ids_0]
        if token_ids_1 is None:
            return [1] + [0] * len(token_ids_0) + [1]
        return [1] + [0] * len(token_ids_0) + [1] + [0] * len(token_ids_1) + [1]

    # ------------------------------------------------------------------
    # __call__ / encode
    # ------------------------------------------------------------------

    def _get_padding_truncation_strategies(self, padding, truncation, max_length, pad_to_multiple_of, verbose):
        """(padding, truncation, max_length) as transformers resolves them."""
        # Only max_length given: truncate to it (transformers' backward compatibility).
        if max_length is not None and padding is False and truncation is None:
            truncation = "longest_first"

        if padding is False or padding is None:
            padding_strategy = "do_not_pad"
        elif padding is True:
            if verbose and max_length is not None and truncation in (None, False, "do_not_truncate"):
                warnings.warn(
                    "`max_length` is ignored when `padding`=`True` and there is no truncation strategy. "
                    "To pad to max length, use `padding='max_length'`."
                )
            padding_strategy = "longest"
        else:
            padding_strategy = getattr(padding, "value", padding)
            if padding_strategy not in PADDING_STRATEGIES:
                raise ValueError(f"padding={padding!r} is not one of True, False, {PADDING_STRATEGIES}")

        if truncation is False or truncation is None:
            truncation_strategy = "do_not_truncate"
        elif truncation is True:
            truncation_strategy = "longest_first"
        else:
            truncation_strategy = getattr(truncation, "value", truncation)
            if truncation_strategy not in TRUNCATION_STRATEGIES:
                raise ValueError(f"truncation={truncation!r} is not one of True, False, {TRUNCATION_STRATEGIES}")

        if max_length is None:
            if padding_strategy == "max_length":
                if self.model_max_length > LARGE_INTEGER:
                    padding_strategy = "do_not_pad"
                else:
                    max_length = self.model_max_length
            if truncation_strategy != "do_not_truncate":
                if self.model_max_length > LARGE_INTEGER:
                    truncation_strategy = "do_not_truncate"
                else:
                    max_length = self.model_max_length

        if padding_strategy != "do_not_pad" and self.pad_token is None:
            raise ValueError("Asking to pad but the tokenizer does not have a padding token (pad_token=None).")

        if (
            truncation_strategy != "do_not_truncate"
            and padding_strategy != "do_not_pad"
            and pad_to_multiple_of is not None
            and max_length is not None
            and max_length % pad_to_multiple_of != 0
        ):
            raise ValueError(
                "Truncation and padding are both activated but "
                f"truncation length ({max_length}) is not a multiple of pad_to_multiple_of ({pad_to_multiple_of})."
            )
        return padding_strategy, truncation_strategy, max_length

    def __call__(
        self,
        text=None,
        text_pair=None,
        add_special_tokens=True,
        padding=False,
        truncation=None,
        max_length=None,
        stride=0,
        pad_to_multiple_of=None,
        padding_side=None,
        return_tensors=None,
        return_token_type_ids=None,
        return_attention_mask=None,
        return_overflowing_tokens=False,
        return_special_tokens_mask=False,
        return_offsets_mapping=False,
        return_length=False,
        verbose=True,
    ):
        """Encode one text, a pair, a batch of texts or a batch of pairs.

        `text` is a str (or a list of ids), or a list of them (a batch); a batch
        item may also be a `(text, text_pair)` tuple. `text_pair` mirrors `text`.
        Returns a BatchEncoding with `input_ids`, `attention_mask` (by default),
        and `token_type_ids`, `special_tokens_mask`, `offset_mapping`,
        `overflowing_tokens` / `num_truncated_tokens`, `length` when asked for.
        With `return_tensors="np"` the values are int64 arrays `[B, T]`
        (`offset_mapping`: `[B, T, 2]`); a single text gets B = 1.
        """
        if text is None:
            raise ValueError("You need to specify `text`.")
        if return_tensors not in (None, "np"):
            raise ValueError(f"return_tensors={return_tensors!r}: npbert returns lists (None) or NumPy arrays ('np').")
        if padding_side not in (None, "left", "right"):
            raise ValueError(f"padding_side should be 'left' or 'right', got {padding_side!r}")
        padding_strategy, truncation_strategy, max_length = self._get_padding_truncation_strategies(
            padding, truncation, max_length, pad_to_multiple_of, verbose
        )
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        options = dict(
            add_special_tokens=add_special_tokens,
            truncation_strategy=truncation_strategy,
            max_length=max_length,
            stride=stride,
            return_token_type_ids=return_token_type_ids,
            return_overflowing_tokens=return_overflowing_tokens,
            return_special_tokens_mask=return_special_tokens_mask,
            return_offsets_mapping=return_offsets_mapping,
            verbose=verbose,
        )
        pad_options = dict(
            padding_strategy=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )

        if not _is_batch(text):
            if text_pair is not None and _is_batch(text_pair):
                raise ValueError("`text` is a single text but `text_pair` is a batch.")
            encoded = self._encode_one(text, text_pair, return_tensors=return_tensors, **options)
            if padding_strategy != "do_not_pad" or return_attention_mask:
                self._pad_single(encoded, **pad_options)
            if return_length:
                encoded["length"] = len(encoded["input_ids"])
            return self._to_batch_encoding(encoded, return_tensors, batch_axis=True)

        if text_pair is not None and (not _is_batch(text_pair) or len(text_pair) != len(text)):
            raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
        if len(text) == 0:
            raise ValueError("Got an empty batch: there is nothing to encode.")
        pairs = text_pair if text_pair is not None else [None] * len(text)
        rows = []
        for item, pair in zip(text, pairs):
            if pair is None and isinstance(item, (list, tuple)) and item and not isinstance(item[0], (int, np.integer)):
                if len(item) == 2:
                    item, pair = item
                elif len(item) == 1:
                    item = item[0]
                else:
                    raise ValueError(f"Expected a pair of sequences, got {len(item)} sequences.")
            row = self._encode_one(item, pair, return_tensors=None, **options)
            if return_length:
                row["length"] = len(row["input_ids"])
            rows.append(row)

        overflow_keys = ("overflowing_tokens", "num_truncated_tokens")
        batch = {key: [row[key] for row in rows] for key in rows[0] if key not in overflow_keys}
        if any("overflowing_tokens" in row for row in rows) and not return_tensors:
            # (transformers' Python tokenizer drops these with tensors, and
            # fails with an AssertionError when only some rows overflow: npbert
            # gives the others [] and 0.)
            batch["overflowing_tokens"] = [row.get("overflowing_tokens", []) for row in rows]
            batch["num_truncated_tokens"] = [row.get("num_truncated_tokens", 0) for row in rows]
        batch = self._pad_batch(batch, **pad_options)
        return self._to_batch_encoding(batch, return_tensors, batch_axis=False)

    def encode(
        self,
        text,
        text_pair=None,
        add_special_tokens=True,
        padding=False,
        truncation=None,
        max_length=None,
        stride=0,
        padding_side=None,
        return_tensors=None,
    ):
        """Text (or pair) -> input_ids: `self(text, ...)["input_ids"]`."""
        return self(
            text,
            text_pair,
            add_special_tokens=add_special_tokens,
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            stride=stride,
            padding_side=padding_side,
            return_tensors=return_tensors,
            return_attention_mask=False,
        )["input_ids"]

    def _ids_of(self, text, with_offsets):
        """One sequence (str, or list of ids) -> (ids, offsets or None)."""
        if isinstance(text, str):
            return self._encode_text(text, with_offsets)
        if isinstance(text, (list, tuple)) and text and all(isinstance(i, (int, np.integer)) for i in text):
            if with_offsets:
                raise ValueError("return_offsets_mapping needs text, not a list of ids.")
            return [int(i) for i in text], None
        raise ValueError(f"Input must be a string (or a list of token ids), got {type(text).__name__}: {text!r:.80}")

    def _encode_one(
        self,
        text,
        text_pair,
        add_special_tokens,
        truncation_strategy,
        max_length,
        stride,
        return_tensors,
        return_token_type_ids,
        return_overflowing_tokens,
        return_special_tokens_mask,
        return_offsets_mapping,
        verbose,
    ):
        """One text or pair -> dict of lists, truncated, not padded
        (transformers' `prepare_for_model`)."""
        ids, offsets = self._ids_of(text, return_offsets_mapping)
        pair = text_pair is not None
        pair_ids, pair_offsets = self._ids_of(text_pair, return_offsets_mapping) if pair else (None, None)

        if return_overflowing_tokens and truncation_strategy == "longest_first" and pair:
            raise ValueError(
                "Not possible to return overflowing tokens for pair of sequences with the "
                "`longest_first`. Please select another truncation strategy than `longest_first`, "
                "for instance `only_second` or `only_first`."
            )
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names

        num_special = self.num_special_tokens_to_add(pair) if add_special_tokens else 0
        total_len = len(ids) + (len(pair_ids) if pair else 0) + num_special
        overflowing = []
        if truncation_strategy != "do_not_truncate" and max_length and total_len > max_length:
            if max_length < num_special:
                raise ValueError(
                    f"max_length={max_length} cannot hold the {num_special} special tokens "
                    f"({'[CLS] A [SEP] B [SEP]' if pair else '[CLS] A [SEP]'}); use max_length >= {num_special}."
                )
            keep, keep_pair, (overflow, overflow_pair) = self._truncation_plan(
                len(ids), len(pair_ids) if pair else None, total_len - max_length, truncation_strategy, stride
            )
            overflowing = [ids[i] for i in overflow] + ([pair_ids[i] for i in overflow_pair] if pair else [])
            ids = ids[keep]
            offsets = offsets[keep] if offsets is not None else None
            if pair:
                pair_ids = pair_ids[keep_pair]
                pair_offsets = pair_offsets[keep_pair] if pair_offsets is not None else None

        if add_special_tokens:
            input_ids = self.build_inputs_with_special_tokens(ids, pair_ids)
            token_type_ids = self.create_token_type_ids_from_sequences(ids, pair_ids)
        else:
            input_ids = ids + (pair_ids if pair else [])
            token_type_ids = [0] * len(input_ids)

        encoded = {"input_ids": input_ids}
        if return_token_type_ids:
            encoded["token_type_ids"] = token_type_ids
        if return_special_tokens_mask:
            encoded["special_tokens_mask"] = (
                self.get_special_tokens_mask(ids, pair_ids) if add_special_tokens else [0] * len(input_ids)
            )
        if return_offsets_mapping:
            none = [(0, 0)] if add_special_tokens else []
            encoded["offset_mapping"] = none + offsets + none + ((pair_offsets + none) if pair else [])
        if return_overflowing_tokens and not return_tensors and overflowing:
            encoded["overflowing_tokens"] = overflowing
            encoded["num_truncated_tokens"] = total_len - max_length if max_length else 0

        if max_length is None and len(input_ids) > self.model_max_length and verbose and not self._warned_too_long:
            logger.warning(
                "Token indices sequence length is longer than the specified maximum sequence length "
                f"for this model ({len(input_ids)} > {self.model_max_length}). Running this sequence through "
                "the model will result in indexing errors"
            )
            self._warned_too_long = True
        return encoded

    def _truncation_plan(self, n_first, n_second, num_to_remove, strategy, stride):
        """Which positions survive truncation (transformers' `truncate_sequences`).

        Returns `(keep_first, keep_second, (overflow_first, overflow_second))`:
        two slices, and the index ranges of the overflowing tokens (the removed
        ones plus `stride` tokens of context).
        """
        left = self.truncation_side == "left"
        everything, nothing = slice(None), range(0)
        if strategy == "only_first" or (strategy == "longest_first" and n_second is None):
            if num_to_remove > n_first:
                raise ValueError(
                    f"Truncation needs to remove {num_to_remove} tokens but the first sequence has only "
                    f"{n_first}; use another truncation strategy or a larger max_length."
                )
            window = min(n_first, stride + num_to_remove)
            if left:
                return slice(num_to_remove, None), everything, (range(window), nothing)
            return slice(0, n_first - num_to_remove), everything, (range(n_first - window, n_first), nothing)
        if strategy == "longest_first":  # a pair: remove from the longer one, then alternately
            first_remove = min(abs(n_second - n_first), num_to_remove)
            second_remove = num_to_remove - first_remove
            if n_first > n_second:
                from_first = first_remove + second_remove // 2
                from_second = second_remove - second_remove // 2
            else:
                from_first = second_remove // 2
                from_second = first_remove + second_remove - second_remove // 2
            if left:
                return slice(from_first, None), slice(from_second, None), (nothing, nothing)
            return slice(0, n_first - from_first), slice(0, n_second - from_second), (nothing, nothing)
        # only_second
        if n_second is None or num_to_remove > n_second:
            have = "no second sequence" if n_second is None else f"a second sequence of only {n_second}"
            raise ValueError(
                f"Truncation 'only_second' needs to remove {num_to_remove} tokens but there is {have}; "
                "use another truncation strategy or a larger max_length."
            )
        window = min(n_second, stride + num_to_remove)
        if left:
            return everything, slice(num_to_remove, None), (nothing, range(window))
        return everything, slice(0, n_second - num_to_remove), (nothing, range(n_second - window, n_second))

    # ------------------------------------------------------------------
    # Padding
    # ------------------------------------------------------------------

    def _pad_one(self, encoded, padding_strategy, max_length, pad_to_multiple_of, padding_side, return_attention_mask):
        """Pad one encoded sequence in place (transformers' `_pad`)."""
        length = len(encoded["input_ids"])
        if padding_strategy == "longest":
            max_length = length
        if max_length is not None and pad_to_multiple_of is not None and max_length % pad_to_multiple_of != 0:
            max_length = (max_length // pad_to_multiple_of + 1) * pad_to_multiple_of

        if return_attention_mask and "attention_mask" not in encoded:
            encoded["attention_mask"] = [1] * length
        if padding_strategy == "do_not_pad" or length == max_length:
            return encoded
        fills = {
            "input_ids": self.pad_token_id,
            "attention_mask": 0,
            "token_type_ids": self.pad_token_type_id,
            "special_tokens_mask": 1,
            "offset_mapping": (0, 0),
        }
        left = (padding_side or self.padding_side) == "left"
        for key, fill in fills.items():
            if key in encoded and (key != "attention_mask" or return_attention_mask):
                padding = [fill] * (max_length - length)  # none if too long already
                encoded[key] = padding + encoded[key] if left else encoded[key] + padding
        return encoded

    def _pad_single(self, encoded, padding_strategy, max_length, pad_to_multiple_of, padding_side,
                    return_attention_mask):
        """transformers' `pad` on one encoding: an empty one is left unpadded."""
        if not encoded["input_ids"]:
            if return_attention_mask:
                encoded["attention_mask"] = []
            return encoded
        return self._pad_one(encoded, padding_strategy, max_length, pad_to_multiple_of, padding_side,
                             return_attention_mask)

    def _pad_batch(self, batch, padding_strategy, max_length, pad_to_multiple_of, padding_side, return_attention_mask):
        """Pad every row to the same length (transformers' `pad` on a batch)."""
        if padding_strategy == "do_not_pad":  # only the attention masks to add
            if return_attention_mask:
                batch["attention_mask"] = [[1] * len(ids) for ids in batch["input_ids"]]
            return batch
        if padding_strategy == "longest":
            max_length = max(len(ids) for ids in batch["input_ids"])
            padding_strategy = "max_length"
        out = {key: [] for key in batch}
        for i in range(len(batch["input_ids"])):
            row = {key: value[i] for key, value in batch.items()}
            row = self._pad_one(row, padding_strategy, max_length, pad_to_multiple_of, padding_side,
                                return_attention_mask)
            for key, value in row.items():
                out.setdefault(key, []).append(value)
        return out

    def _to_batch_encoding(self, encoded, return_tensors, batch_axis):
        if return_tensors == "np":
            encoded = {
                key: _as_int64([value] if batch_axis else value, key) for key, value in encoded.items()
            }
        return BatchEncoding(encoded)

    # ------------------------------------------------------------------
    # Decoding
    # ------------------------------------------------------------------

    def convert_tokens_to_string(self, tokens):
        """["un", "##aff", "##able"] -> "unaffable"."""
        return " ".join(tokens).replace(" ##", "").strip()

    @staticmethod
    def clean_up_tokenization(text):
        """Remove the spaces BERT's tokens leave before punctuation and contractions."""
        return (
            text.replace(" .", ".")
            .replace(" ?", "?")
            .replace(" !", "!")
            .replace(" ,", ",")
            .replace(" ' ", "'")
            .replace(" n't", "n't")
            .replace(" 'm", "'m")
            .replace(" 's", "'s")
            .replace(" 've", "'ve")
            .replace(" 're", "'re")
        )

    def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None):
        """Ids -> text; a batch (list of lists, or 2-D array) -> list of texts."""
        token_ids = _to_python(token_ids)
        if isinstance(token_ids, (list, tuple)) and token_ids and isinstance(token_ids[0], (list, tuple)):
            return [self.decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in token_ids]
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        text = self.convert_tokens_to_string(self.convert_ids_to_tokens(token_ids, skip_special_tokens))
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def batch_decode(self, sequences, skip_special_tokens=False, clean_up_tokenization_spaces=None):
        result = self.decode(sequences, skip_special_tokens, clean_up_tokenization_spaces)
        return [result] if isinstance(result, str) else result

    # ------------------------------------------------------------------
    # Files
    # ------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Read `vocab.txt` and, when present, `tokenizer_config.json` (and the
        legacy `special_tokens_map.json`) from the directory `path`.
        Keyword arguments override the files."""
        if not os.path.isdir(path):
            raise ValueError(f"from_pretrained expects a directory holding vocab.txt, got '{path}'.")
        config = {}
        config_file = os.path.join(path, TOKENIZER_CONFIG_FILE)
        if os.path.isfile(config_file):
            with open(config_file, encoding="utf-8") as f:
                config = json.load(f)
        added = config.pop("added_tokens_decoder", None)
        map_file = os.path.join(path, SPECIAL_TOKENS_MAP_FILE)
        if added is None and os.path.isfile(map_file):
            with open(map_file, encoding="utf-8") as f:
                for key, value in json.load(f).items():
                    config[key] = value
        if "extra_special_tokens" in config and "additional_special_tokens" not in config:
            config["additional_special_tokens"] = config.pop("extra_special_tokens")

        known = {
            "do_lower_case", "never_split", "tokenize_chinese_chars", "strip_accents",
            *SPECIAL_TOKEN_NAMES, "do_basic_tokenize", "model_max_length", "max_len", "padding_side",
            "truncation_side", "clean_up_tokenization_spaces", "model_input_names", "additional_special_tokens",
        }
        init = {key: _token_content(value) for key, value in config.items() if key in known}
        if isinstance(init.get("additional_special_tokens"), list):
            init["additional_special_tokens"] = [_token_content(t) for t in init["additional_special_tokens"]]
        init.update(kwargs)
        tokenizer = cls(os.path.join(path, VOCAB_FILE), **init)

        for index, token in (added or {}).items():
            content = _token_content(token)
            if tokenizer.vocab.get(content) != int(index):
                raise ValueError(
                    f"{TOKENIZER_CONFIG_FILE} adds the token {content!r} at id {index}, which is not its id in "
                    f"{VOCAB_FILE}; npbert supports no tokens beyond the vocabulary."
                )
        return tokenizer

    def save_pretrained(self, save_directory):
        """Write `vocab.txt` and `tokenizer_config.json`; returns their paths."""
        os.makedirs(save_directory, exist_ok=True)
        vocab_file = os.path.join(save_directory, VOCAB_FILE)
        with open(vocab_file, "w", encoding="utf-8") as writer:
            index = 0
            for token, token_index in sorted(self.vocab.items(), key=lambda kv: kv[1]):
                if index != token_index:
                    logger.warning(f"Saving vocabulary to {vocab_file}: vocabulary indices are not consecutive.")
                    index = token_index
                writer.write(token + "\n")
                index += 1
        config = dict(self._init_config)
        config.update({name: getattr(self, name) for name in SPECIAL_TOKEN_NAMES})
        if self.additional_special_tokens:
            config["additional_special_tokens"] = list(self.additional_special_tokens)
        config.update(
            model_max_length=self.model_max_length,
            padding_side=self.padding_side,
            truncation_side=self.truncation_side,
            clean_up_tokenization_spaces=self.clean_up_tokenization_spaces,
            tokenizer_class="BertTokenizer",
        )
        config_file = os.path.join(save_directory, TOKENIZER_CONFIG_FILE)
        with open(config_file, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, ensure_ascii=False)
            f.write("\n")
        return vocab_file, config_file

    def __repr__(self):
        return (
            f"BertTokenizer(vocab_size={self.vocab_size}, model_max_length={self.model_max_length}, "
            f"do_lower_case={self.do_lower_case}, special_tokens={self.special_tokens_map})"
        )


def _is_batch(text):
    """A list/tuple of texts (or of pairs, or of id lists) rather than one text."""
    return isinstance(text, (list, tuple)) and (
        not text or isinstance(text[0], (str, list, tuple))
    )


def _token_content(value):
    """A token as written in a config: "[UNK]" or {"content": "[UNK]", ...}."""
    if isinstance(value, dict) and "content" in value:
        return value["content"]
    return value


def _to_python(ids):
    """NumPy arrays / scalars (or anything with .tolist()) -> Python ints and lists."""
    if hasattr(ids, "tolist"):
        return ids.tolist()
    if isinstance(ids, (list, tuple)):
        return [_to_python(i) for i in ids]
    return ids
