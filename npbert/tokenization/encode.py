"""`tokenizer(text, text_pair, ...)` and `encode`: texts -> ids, [CLS] A [SEP] (B [SEP]),
truncated and padded, as transformers' `PreTrainedTokenizerBase.__call__` and
`prepare_for_model` (here `_encode_one`)."""
import numpy as np

from npbert.tokenization.alignment import Alignment, RowLayout
from npbert.tokenization.encoding import to_batch_encoding
from npbert.tokenization.extras import Words, as_words
from npbert.tokenization.warn import warn


class EncodeMixin:
    """Mixed into BertTokenizer; uses its `_encode_text`, special-token helpers and
    PaddingTruncationMixin."""

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
        is_split_into_words=False,
        tokenizer_kwargs=None,
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
        if tokenizer_kwargs:             # transformers 5: keywords as one dict, taken as keywords
            args = {k: v for k, v in locals().items() if k not in ("self", "tokenizer_kwargs", "__class__")}
            return self(**{**args, **tokenizer_kwargs})
        if text is None:
            raise ValueError("You need to specify `text`.")
        if is_split_into_words:
            # Words given by the caller: each word is tokenized alone; word_ids() maps the
            # tokens back to the given words.
            if return_offsets_mapping:
                raise ValueError("return_offsets_mapping with is_split_into_words=True is not supported; "
                                 "use word_ids() to map tokens to the given words")
            text, text_pair = as_words(text), as_words(text_pair)
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

        side = padding_side or self.padding_side
        layouts = []
        # return_overflowing_tokens as the Rust tokenizer gives it (is_fast): every window its own
        # row, `overflow_to_sample_mapping` naming the example each row came from, a single text
        # answered as a batch of its windows
        windows = bool(return_overflowing_tokens) and self.is_fast
        if windows and not _is_batch(text):
            if text_pair is not None and _is_batch(text_pair):
                raise ValueError("`text` is a single text but `text_pair` is a batch.")
            text, text_pair = [text], None if text_pair is None else [text_pair]
        if not _is_batch(text):
            if text_pair is not None and _is_batch(text_pair):
                raise ValueError("`text` is a single text but `text_pair` is a batch.")
            encoded = self._encode_one(text, text_pair, return_tensors=return_tensors, layouts=layouts, **options)
            unpadded = len(encoded["input_ids"])
            if padding_strategy != "do_not_pad" or return_attention_mask:
                self._pad_single(encoded, **pad_options)
            _set_padding(layouts[0], len(encoded["input_ids"]) - unpadded, side)
            if return_length:
                encoded["length"] = len(encoded["input_ids"])
            encoding = to_batch_encoding(encoded, return_tensors, batch_axis=True)
            encoding._alignment = Alignment(self, layouts, flat=not return_tensors)
            return encoding

        if text_pair is not None and (not _is_batch(text_pair) or len(text_pair) != len(text)):
            raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
        if len(text) == 0:
            raise ValueError("Got an empty batch: there is nothing to encode.")
        pairs = text_pair if text_pair is not None else [None] * len(text)
        rows, sample_mapping = [], []
        for sample, (item, pair) in enumerate(zip(text, pairs)):
            if pair is None and isinstance(item, (list, tuple)) and item and not isinstance(item[0], (int, np.integer)):
                if len(item) == 2:
                    item, pair = item
                elif len(item) == 1:
                    item = item[0]
                else:
                    raise ValueError(f"Expected a pair of sequences, got {len(item)} sequences.")
            if windows:
                item_rows = self._encode_windows(item, pair, layouts=layouts, **options)
            else:
                item_rows = [self._encode_one(item, pair, return_tensors=None, layouts=layouts, **options)]
            for row in item_rows:
                if return_length and not windows:
                    row["length"] = len(row["input_ids"])
                rows.append(row)
                sample_mapping.append(sample)

        overflow_keys = ("overflowing_tokens", "num_truncated_tokens")
        batch = {key: [row[key] for row in rows] for key in rows[0] if key not in overflow_keys}
        if any("overflowing_tokens" in row for row in rows) and not return_tensors:
            # (transformers' Python tokenizer drops these with tensors, and
            # fails with an AssertionError when only some rows overflow: npbert
            # gives the others [] and 0.)
            batch["overflowing_tokens"] = [row.get("overflowing_tokens", []) for row in rows]
            batch["num_truncated_tokens"] = [row.get("num_truncated_tokens", 0) for row in rows]
        unpadded = [len(ids) for ids in batch["input_ids"]]
        batch = self._pad_batch(batch, **pad_options)
        for layout, before, ids in zip(layouts, unpadded, batch["input_ids"]):
            _set_padding(layout, len(ids) - before, side)
        if windows:          # the Rust tokenizer's length counts the padding too
            if return_length:
                batch["length"] = [len(ids) for ids in batch["input_ids"]]
            batch["overflow_to_sample_mapping"] = sample_mapping
        encoding = to_batch_encoding(batch, return_tensors, batch_axis=False)
        encoding._alignment = Alignment(self, layouts, flat=False)
        return encoding

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
        **kwargs,
    ):
        """Text (or pair) -> input_ids: `self(text, ...)["input_ids"]`; other keywords of
        `__call__` (`is_split_into_words`, `pad_to_multiple_of`, `verbose`, ...) are passed on."""
        kwargs.pop("return_attention_mask", None)
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
            **kwargs,
        )["input_ids"]

    def prepare_for_model(self, ids, pair_ids=None, prepend_batch_axis=False, **kwargs):
        """Ids of one sequence (and of a pair) -> the model's inputs: special tokens, truncation,
        padding as `__call__` does them on ids (transformers' `prepare_for_model`).  With
        `return_tensors="np"` the arrays are 1-D unless `prepend_batch_axis=True`."""
        for name, value in (("ids", ids), ("pair_ids", pair_ids)):
            if value is not None and not (isinstance(value, (list, tuple)) and all(
                    isinstance(i, (int, np.integer)) for i in value)):
                raise ValueError(f"prepare_for_model takes lists of token ids; {name} is {value!r:.60}")
        encoding = self(list(ids), None if pair_ids is None else list(pair_ids), **kwargs)
        if kwargs.get("return_tensors") and not prepend_batch_axis and not kwargs.get("return_overflowing_tokens"):
            for key in list(encoding):
                encoding[key] = encoding[key][0]
        return encoding

    def _ids_of(self, text, with_offsets):
        """One sequence (str, or list of ids) -> (ids, offsets or None)."""
        if isinstance(text, str):
            ids, offsets = self._encode_text(text, with_offsets)
            if self._unk_id is None and None in ids:
                raise ValueError(f"{text!r:.60} has a word the vocabulary lacks and the tokenizer's unk_token is "
                                 "None; set one (tokenizer.unk_token = '[UNK]') to encode it.")
            return ids, offsets
        if isinstance(text, Words):              # (return_offsets_mapping is refused for words)
            return [i for word in text.words for i in self._encode_text(word, False)[0]], None
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
        layouts=None,
    ):
        """One text or pair -> dict of lists, truncated, not padded
        (transformers' `prepare_for_model`); appends the row's RowLayout to `layouts`."""
        ids, offsets = self._ids_of(text, return_offsets_mapping)
        pair = text_pair is not None
        pair_ids, pair_offsets = self._ids_of(text_pair, return_offsets_mapping) if pair else (None, None)
        kept = [(0, len(ids))] + ([(0, len(pair_ids))] if pair else [])

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
            kept = [keep.indices(len(ids))[:2]] + ([keep_pair.indices(len(pair_ids))[:2]] if pair else [])
            ids = ids[keep]
            offsets = offsets[keep] if offsets is not None else None
            if pair:
                pair_ids = pair_ids[keep_pair]
                pair_offsets = pair_offsets[keep_pair] if pair_offsets is not None else None

        encoded = self._assemble(ids, offsets, pair_ids, pair_offsets, add_special_tokens, return_token_type_ids,
                                 return_special_tokens_mask, return_offsets_mapping, max_length, verbose)
        if return_overflowing_tokens and not return_tensors and overflowing:
            encoded["overflowing_tokens"] = overflowing
            encoded["num_truncated_tokens"] = total_len - max_length if max_length else 0
        if layouts is not None:
            layouts.append(RowLayout((text, text_pair) if pair else (text,), tuple(kept), add_special_tokens))
        return encoded

    def _assemble(self, ids, offsets, pair_ids, pair_offsets, add_special_tokens, return_token_type_ids,
                  return_special_tokens_mask, return_offsets_mapping, max_length, verbose):
        """The (truncated) ids of one or two sequences -> one row: [CLS] A [SEP] (B [SEP]) and the
        fields asked for (transformers' `prepare_for_model` after truncation)."""
        pair = pair_ids is not None
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
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
        warned = self.deprecation_warnings
        if max_length is None and len(input_ids) > self.model_max_length and verbose and not warned.get(_TOO_LONG):
            warn("Token indices sequence length is longer than the specified maximum sequence length "
                 f"for this model ({len(input_ids)} > {self.model_max_length}). Running this sequence through "
                 "the model will result in indexing errors", stacklevel=5)
            warned[_TOO_LONG] = True
        return encoded


_TOO_LONG = "sequence-length-is-longer-than-the-specified-maximum"


def _set_padding(layout, n_pad, side):
    if side == "left":
        layout.pad_left = n_pad
    else:
        layout.pad_right = n_pad


def _is_batch(text):
    """A list/tuple of texts (or of pairs, or of id lists) rather than one text."""
    return isinstance(text, (list, tuple)) and (
        not text or isinstance(text[0], (str, list, tuple, Words))
    )
