"""Truncation and padding, as transformers' `PreTrainedTokenizerBase` does them.

    _get_padding_truncation_strategies   padding=True / "max_length" / ..., truncation=... -> strategies
    _truncation_plan                     which tokens survive (transformers' `truncate_sequences`)
    _pad_one, _pad_batch                 pad to the longest row or to max_length (`_pad`, `pad`)
    pad                                  pad encodings made without padding
"""
from npbert.tokenization.encoding import (LARGE_INTEGER, PADDING_STRATEGIES, TRUNCATION_STRATEGIES,
                                          to_batch_encoding)
from npbert.tokenization.warn import warn


class PaddingTruncationMixin:
    """Mixed into BertTokenizer; uses its model_max_length, pad_token, padding_side,
    truncation_side and model_input_names."""

    def _get_padding_truncation_strategies(self, padding, truncation, max_length, pad_to_multiple_of, verbose):
        """(padding, truncation, max_length) as transformers resolves them."""
        # Only max_length given: truncate to it (transformers' backward compatibility).
        if max_length is not None and padding is False and truncation is None:
            truncation = "longest_first"

        if padding is False or padding is None:
            padding_strategy = "do_not_pad"
        elif padding is True:
            if verbose and max_length is not None and truncation in (None, False, "do_not_truncate"):
                warn("`max_length` is ignored when `padding`=`True` and there is no truncation strategy. "
                     "To pad to max length, use `padding='max_length'`.", stacklevel=5)
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

    def pad(self, encoded_inputs, padding=True, max_length=None, pad_to_multiple_of=None, padding_side=None,
            return_attention_mask=None, return_tensors=None, verbose=True):
        """Pad encodings made without padding, as transformers' `pad`: `encoded_inputs` is a
        BatchEncoding / dict of lists (one example, or a batch of rows), or a list of such dicts
        (what a DataLoader collates).  Pads input_ids with pad_token_id, token_type_ids with 0,
        attention_mask with 0 (adding it when absent), special_tokens_mask with 1."""
        if isinstance(encoded_inputs, (list, tuple)):
            if not encoded_inputs or not all(isinstance(e, dict) for e in encoded_inputs):
                raise ValueError("pad() takes a dict of lists or a non-empty list of dicts (one per example)")
            keys = list(encoded_inputs[0])
            missing = [i for i, e in enumerate(encoded_inputs) if set(e) != set(keys)]
            if missing:
                raise ValueError(f"pad(): example {missing[0]} has keys {sorted(encoded_inputs[missing[0]])}, "
                                 f"example 0 has {sorted(keys)}")
            encoded_inputs = {k: [e[k] for e in encoded_inputs] for k in keys}
        main = self.model_input_names[0]          # "input_ids", unless the model's first input is renamed
        if main not in encoded_inputs:
            raise ValueError(f"pad() needs {main}; got the keys {sorted(encoded_inputs)}")
        encoded = {k: (v.tolist() if hasattr(v, "tolist") else list(v)) for k, v in encoded_inputs.items()}
        if main != "input_ids":
            return self._pad_renamed(encoded, main, padding, max_length, pad_to_multiple_of, padding_side,
                                     return_attention_mask, return_tensors, verbose)
        strategy, _, max_length = self._get_padding_truncation_strategies(
            padding, False, max_length, pad_to_multiple_of, verbose)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        options = dict(padding_strategy=strategy, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
                       padding_side=padding_side, return_attention_mask=return_attention_mask)
        ids = encoded["input_ids"]
        if ids and isinstance(ids[0], (list, tuple)):
            return to_batch_encoding(self._pad_batch(encoded, **options), return_tensors, batch_axis=False)
        return to_batch_encoding(self._pad_single(encoded, **options), return_tensors, batch_axis=True)

    def _pad_renamed(self, encoded, main, padding, max_length, pad_to_multiple_of, padding_side,
                     return_attention_mask, return_tensors, verbose):
        """pad() when `model_input_names[0]` is not "input_ids": `main` is padded as input_ids are."""
        if "input_ids" in encoded:
            raise ValueError(f"pad(): the inputs have both {main!r} (model_input_names[0]) and 'input_ids'")
        encoded["input_ids"] = encoded.pop(main)
        names = self.model_input_names
        try:
            self.model_input_names = ["input_ids"] + names[1:]
            result = self.pad(encoded, padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask,
                              return_tensors, verbose)
        finally:
            self.model_input_names = names
        result[main] = result.pop("input_ids")
        return result
