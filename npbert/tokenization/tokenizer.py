"""BertTokenizer: text -> input_ids, token_type_ids, attention_mask (and offsets).

Equal, output for output, to transformers' pure-Python BERT tokenizer (`BertTokenizerLegacy` in
transformers 5.x, `BertTokenizer` in 4.x) for the same vocabulary and options; see
docs/tokenizer.md for a walk-through.  The text becomes tokens as in transformers'
`PreTrainedTokenizer.tokenize` and `BertTokenizer._tokenize`:

    tokenize(text)      cut the text at special tokens typed in it ("[SEP]" stays whole); then
    _tokenize(piece)    BasicTokenizer.tokenize (basic.py), WordpieceTokenizer.tokenize on each
                        word (wordpiece.py), a never_split word kept whole

That is the reference path.  On the fast path (`npbert.get_path() == "fast"`, the default) the
same tokens, their ids and character offsets come from fast.py (one regex pass, a cache per raw
word); tests/tokenization checks the two paths equal.  The rest of the class lives in:

    encode.py    __call__, encode: [CLS] A [SEP] (B [SEP]), truncation, padding -> BatchEncoding
    windows.py   return_overflowing_tokens as the Rust tokenizer gives it: a row per window
    padding.py   the truncation and padding strategies, pad()
    files.py     from_pretrained, save_pretrained, save_vocabulary, load_vocab (tokenizer_json.py: tokenizer.json)
    added.py     vocabulary, special tokens, add_tokens, add_special_tokens, cutting the text at them
    alignment.py what BatchEncoding's tokens(), word_ids(), char_to_token(), ... read
    extras.py    encode_plus, batch_encode_plus, is_split_into_words
"""
import json

from npbert.paths import is_fast
from npbert.tokenization import aligned
from npbert.tokenization.added import VocabularyMixin
from npbert.tokenization.basic import BasicTokenizer
from npbert.tokenization.encode import EncodeMixin
from npbert.tokenization.encoding import VERY_LARGE_INTEGER, to_python
from npbert.tokenization.extras import TokenizerExtras
from npbert.tokenization.files import (NOT_PASSED_ON, PretrainedFilesMixin, check_options, read_vocab_lines,
                                      token_content)
from npbert.tokenization.padding import PaddingTruncationMixin
from npbert.tokenization.windows import WindowsMixin
from npbert.tokenization.warn import warn
from npbert.tokenization.wordpiece import WordpieceTokenizer


class BertTokenizer(VocabularyMixin, TokenizerExtras, EncodeMixin, WindowsMixin, PaddingTruncationMixin,
                    PretrainedFilesMixin):
    """BERT's tokenizer: BasicTokenizer + WordPiece + the encoding interface.

    Args:
        vocab_file: path to vocab.txt (one token per line, id = line number).
        do_lower_case: lower-case (and, unless `strip_accents=False`, strip accents from) the text.
        never_split: words kept whole and unchanged by the BasicTokenizer.
        tokenize_chinese_chars: split CJK ideographs into words of their own.
        strip_accents: None (follow `do_lower_case`), True or False.
        unk_token, sep_token, pad_token, cls_token, mask_token: special tokens; each must be in
            the vocabulary (pad_token and mask_token may be None).
        **kwargs: `do_basic_tokenize`, `model_max_length`, `padding_side`, `truncation_side`,
            `clean_up_tokenization_spaces`, `model_input_names`, `additional_special_tokens`,
            `max_input_chars_per_word`, as transformers.
    """

    def __init__(
        self,
        vocab_file=None,
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
        if vocab_file is None and "vocab" in kwargs:     # transformers 5's name: BertTokenizer(vocab=...)
            vocab_file = kwargs.pop("vocab")
        added_source = kwargs.pop("_added_tokens_source", None)     # the file from_pretrained read them from
        # use_fast=False (AutoTokenizer.from_pretrained(d, use_fast=False)): present the tokenizer as
        # transformers' Python one: is_fast False, overflowing tokens in its form (docs/tokenizer.md)
        self._use_fast = bool(kwargs.pop("use_fast", True))
        for key in kwargs:                      # as transformers: a keyword may not shadow a method
            if callable(getattr(type(self), key, None)):
                raise AttributeError(f"{key} conflicts with the method {key} in {type(self).__name__}")
        if vocab_file is None:
            raise TypeError("BertTokenizer needs a vocabulary: BertTokenizer('path/to/vocab.txt'), or a {token: id} dict")
        unk_token, sep_token, pad_token, cls_token, mask_token = (
            token_content(t) for t in (unk_token, sep_token, pad_token, cls_token, mask_token))
        options = dict(do_lower_case=do_lower_case, never_split=never_split,
                       tokenize_chinese_chars=tokenize_chinese_chars, strip_accents=strip_accents,
                       unk_token=unk_token, sep_token=sep_token, pad_token=pad_token, cls_token=cls_token,
                       mask_token=mask_token, **kwargs)
        # transformers' init_kwargs: every constructor argument, the defaults too (a copy of the
        # vocabulary given as a dict is not kept), and unknown keywords, kept and saved as transformers does
        self.init_inputs = ()          # (transformers keeps positional arguments here; npbert has none beyond the vocabulary)
        self.init_kwargs = {"vocab_file": vocab_file if not isinstance(vocab_file, dict) else None,
                            "do_basic_tokenize": True, "clean_up_tokenization_spaces": True, **options}
        for name in ("unk_token", "sep_token", "cls_token"):
            if options[name] is None:
                raise ValueError(f"BertTokenizer needs a {name}; got None.")
        check_options(options, "BertTokenizer")
        self._vocab_lines = read_vocab_lines(vocab_file)
        self.vocab = {token: index for index, token in enumerate(self._vocab_lines)}
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
        self.bos_token, self.eos_token = kwargs.pop("bos_token", None), kwargs.pop("eos_token", None)
        extra = kwargs.pop("additional_special_tokens", None) or kwargs.pop("extra_special_tokens", None) or []
        self.additional_special_tokens = [str(token_content(getattr(t, "content", t))) for t in extra]
        where = f"'{vocab_file}'" if not isinstance(vocab_file, dict) else "given"
        self.added_tokens_encoder, self._added_special, self._added_normalized = {}, {}, {}
        # vocabulary entries a file declares (kept whole in a text), tokens add_tokens(special_tokens=True) lists
        self._vocab_added, self._listed_special = {}, []
        self._all_ids = self.vocab
        self._register_added_tokens(kwargs.pop("added_tokens_decoder", None), added_source or f"The vocabulary {where}")
        # bos/eos and additional special tokens given but not in the vocabulary are added after it,
        # as transformers adds them
        for token in [self.bos_token, self.eos_token] + self.additional_special_tokens:
            if token is not None and token not in self._all_ids:
                self._append_added(token, special=True, normalized=False)
        for name in ("pad_token", "mask_token"):        # optional: None, as for Google's FullTokenizer
            token = getattr(self, name)
            if token is not None and str(token) not in self._all_ids:
                warn(f"The vocabulary {where} has no {name} {str(token)!r}: {name} is None (add one with "
                     f"add_special_tokens({{'{name}': ...}}), or pass the token this vocabulary uses)")
                setattr(self, name, None)
        missing = [t for t in self.all_special_tokens if t not in self._all_ids]
        if missing:
            raise ValueError(
                f"The vocabulary {where} lacks the special token(s) {missing}. [UNK], [CLS] and [SEP] (and any "
                "additional special token) must be vocabulary entries; pass the names this vocabulary uses "
                "(e.g. unk_token='<unk>')."
            )

        model_max_length = kwargs.pop("model_max_length", kwargs.pop("max_len", None))
        self.model_max_length = VERY_LARGE_INTEGER if model_max_length is None else int(model_max_length)
        self.padding_side = kwargs.pop("padding_side", "right")
        self.truncation_side = kwargs.pop("truncation_side", "right")
        self.model_input_names = list(kwargs.pop("model_input_names", ["input_ids", "token_type_ids", "attention_mask"]))
        self.clean_up_tokenization_spaces = kwargs.pop("clean_up_tokenization_spaces", True)
        self.pad_token_type_id = 0
        unknown = sorted(k for k in kwargs if k not in NOT_PASSED_ON)
        if unknown:
            warn(f"BertTokenizer: {unknown} are not options of npbert's BertTokenizer; kept in init_kwargs and "
                 "saved with the tokenizer (as transformers does), with no effect")
        self._unused_init_kwargs = {k: kwargs[k] for k in unknown if _is_json(kwargs[k])}
        self._init_config = {
            "do_lower_case": do_lower_case,
            "do_basic_tokenize": self.do_basic_tokenize,
            "never_split": list(never_split) if never_split is not None else None,
            "tokenize_chinese_chars": tokenize_chinese_chars,
            "strip_accents": strip_accents,
        }

        self._rebuild()
        self.deprecation_warnings = {}      # warnings given once (transformers' name; `= {}` re-arms them)

    # ------------------------------------------------------------------
    # Vocabulary and special tokens
    # ------------------------------------------------------------------

    @property
    def is_fast(self):
        """True: the BatchEncodings this tokenizer returns have the methods of transformers' fast
        (Rust) tokenizers (`tokens()`, `word_ids()`, `char_to_token()`, ...), it gives
        `return_offsets_mapping`, and `return_overflowing_tokens=True` cuts overflowing windows into
        rows as the Rust tokenizer does, so tutorial code written for `AutoTokenizer` runs.  (It says
        what the tokenizer offers, not that it is written in Rust.)  False when made with
        `use_fast=False`: then overflowing tokens come back as transformers' Python tokenizer gives them."""
        return self._use_fast

    @property
    def do_lower_case(self):
        return self.basic_tokenizer.do_lower_case

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

    def tokenize(self, text, pair=None, add_special_tokens=False):
        """Text -> WordPiece tokens; with `add_special_tokens=True` as the model sees them:
        [CLS] A [SEP] (B [SEP])."""
        tokens = self._text_to_tokens(text)
        if not add_special_tokens:
            return tokens + (self._text_to_tokens(pair) if pair is not None else [])
        out = [self.cls_token] + tokens + [self.sep_token]
        return out + (self._text_to_tokens(pair) + [self.sep_token] if pair is not None else [])

    def _text_to_tokens(self, text):
        """transformers' `PreTrainedTokenizer.tokenize`: special tokens typed in the text stay
        whole, `_tokenize` runs on the text between them."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}")
        if is_fast():
            return self._fast.tokenize(text)
        tokens = []
        for start, end, special in self._segments(text):
            if special is not None:
                tokens.append(special)
            else:
                tokens.extend(self._tokenize(text[start:end]))
        return tokens

    def _tokenize(self, text):
        """transformers' `BertTokenizer._tokenize`: text without special tokens -> WordPiece tokens."""
        split_tokens = []
        if self.do_basic_tokenize:
            for token in self.basic_tokenizer.tokenize(text, never_split=self.all_special_tokens):
                if token in self.basic_tokenizer.never_split:   # the user's never_split: kept whole
                    split_tokens.append(token)
                else:
                    split_tokens += self.wordpiece_tokenizer.tokenize(token)
        else:
            split_tokens = self.wordpiece_tokenizer.tokenize(text)
        return split_tokens

    def _encode_text(self, text, with_offsets):
        """One text -> (ids, offsets or None), no special tokens added."""
        if is_fast():
            return self._fast.encode(text, with_offsets)
        if not with_offsets:
            return self.convert_tokens_to_ids(self._text_to_tokens(text)), None
        # Offsets (npbert's addition: transformers' Python tokenizer has none) come from the
        # BasicTokenizer's steps carrying character spans (aligned.py), over each whole piece of
        # text between special tokens, without the fast path's cache and ASCII shortcut.
        ids, offsets = [], []
        basic = self.basic_tokenizer if self.do_basic_tokenize else None
        for start, end, special in self._segments(text):
            if special is not None:
                ids.append(self._segment_ids[special])
                offsets.append((start, end))
                continue
            tokens, spans = aligned.wordpieces_with_spans(basic, self._never_split, self.wordpiece_tokenizer.tokenize_word,
                                                          text[start:end], ascii_shortcut=False)
            ids += self.convert_tokens_to_ids(tokens)
            offsets += [(start + s, start + e) for s, e in spans]
        return ids, offsets

    # ------------------------------------------------------------------
    # Special tokens around sequences
    # ------------------------------------------------------------------

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        """[CLS] A [SEP]  or  [CLS] A [SEP] B [SEP]."""
        if self._cls_id is None or self._sep_id is None:
            name = "cls_token" if self._cls_id is None else "sep_token"
            raise ValueError(f"The tokenizer's {name} is None, so it cannot add [CLS] ... [SEP]; set it "
                             f"(tokenizer.{name} = ...) or pass add_special_tokens=False.")
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
    # Decoding
    # ------------------------------------------------------------------

    @staticmethod
    def _join_tokens(tokens):
        """transformers' `BertTokenizer.convert_tokens_to_string`: ["un", "##aff", "##able"] -> "unaffable"."""
        return " ".join(tokens).replace(" ##", "").strip()

    def convert_tokens_to_string(self, tokens):
        """["bert", ",", "gp", "##t"] -> "bert, gpt": the tokens joined, `##` pieces glued on,
        then (with `self.clean_up_tokenization_spaces`, True for BERT) `clean_up_tokenization`,
        as `decode` does: what transformers' `decode` prints for these tokens' ids."""
        text = self._join_tokens(tokens)
        return self.clean_up_tokenization(text) if self.clean_up_tokenization_spaces else text

    @staticmethod
    def clean_up_tokenization(text):
        """transformers' `clean_up_tokenization`: remove the spaces BERT's tokens leave before
        . ? ! , and in ' n't 'm 's 've 're."""
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

    def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None,
               spaces_between_special_tokens=True):
        """Ids -> text; a batch (list of lists, or 2-D array) -> list of texts.
        `clean_up_tokenization_spaces=None` uses `self.clean_up_tokenization_spaces`.  Tokens added
        beyond the vocabulary are joined to their neighbours with a space, or none with
        `spaces_between_special_tokens=False` (transformers' Python `_decode`)."""
        token_ids = to_python(token_ids)
        if isinstance(token_ids, (list, tuple)) and token_ids and isinstance(token_ids[0], (list, tuple)):
            return [self.decode(ids, skip_special_tokens, clean_up_tokenization_spaces, spaces_between_special_tokens)
                    for ids in token_ids]
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        tokens = self.convert_ids_to_tokens(token_ids, skip_special_tokens)
        added = set(self.added_tokens_encoder) - set(self.all_special_tokens)
        added |= {t for t in self.additional_special_tokens or [] if t in self.added_tokens_encoder}
        if not added.intersection(tokens):
            text = self._join_tokens(tokens)
        else:                       # the added tokens as they are, the runs between them joined
            chunks, run = [], []
            for token in tokens:
                if token in added:
                    chunks += [self._join_tokens(run)] if run else []
                    chunks.append(token)
                    run = []
                else:
                    run.append(token)
            chunks += [self._join_tokens(run)] if run else []
            text = (" " if spaces_between_special_tokens else "").join(chunks)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def batch_decode(self, sequences, skip_special_tokens=False, clean_up_tokenization_spaces=None,
                     spaces_between_special_tokens=True):
        """A batch of id sequences -> list of texts."""
        sequences = to_python(sequences)
        if isinstance(sequences, (list, tuple)) and len(sequences) == 0:
            return []
        result = self.decode(sequences, skip_special_tokens, clean_up_tokenization_spaces, spaces_between_special_tokens)
        return [result] if isinstance(result, str) else result

    def __repr__(self):
        return (
            f"BertTokenizer(vocab_size={self.vocab_size}, model_max_length={self.model_max_length}, "
            f"do_lower_case={self.do_lower_case}, special_tokens={self.special_tokens_map})"
        )


def _is_json(value):
    """Can `value` be written into tokenizer_config.json as it is?"""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
