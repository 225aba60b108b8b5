"""Data collators: a list of examples (dicts) -> one batch (a dict of NumPy arrays), as
transformers' collators.  A collator that draws random numbers owns an `np.random.Generator`
in `self.rng`, which the Trainer checkpoints so that a resumed run is bit-identical.

    DataCollatorWithPadding             pad input_ids / attention_mask / token_type_ids to the longest
    DataCollatorForTokenClassification  ... and the per-token labels with -100
    DataCollatorForLanguageModeling     pad, then choose 15 % of the tokens for MLM (80/10/10)

Each takes a list of examples or a dict of columns (as_rows).
    DataCollatorForWholeWordMask        the same, choosing whole words (a token and its ## pieces)
"""
from collections.abc import Mapping

import numpy as np

from npbert import unsupported

# How each field is padded (the attention mask and token types with 0, special_tokens_mask with 1).
_PAD_VALUES = {"attention_mask": 0, "token_type_ids": 0, "special_tokens_mask": 1, "labels": -100,
               "position_ids": 0}
_SEQUENCE_FIELDS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "position_ids")


def _rename_label(example):
    """transformers' default collator: a "label" or "label_ids" field becomes "labels"."""
    if "label" in example and "labels" not in example:
        example = dict(example)
        example["labels"] = example.pop("label")
    elif "label_ids" in example and "labels" not in example:
        example = dict(example)
        example["labels"] = example.pop("label_ids")
    return example


def as_rows(features):
    """A batch as a list of examples: a dict of columns (a `datasets.Dataset[:8]` slice, a
    BatchEncoding of several texts) becomes one dict per row, as transformers' tokenizer.pad
    takes either; a list (or tuple) of examples is returned as it is."""
    if not isinstance(features, Mapping):
        return features
    lengths = {k: len(v) for k, v in features.items() if hasattr(v, "__len__") and not isinstance(v, str)}
    if len(lengths) != len(features) or len(set(lengths.values())) != 1:
        raise ValueError("a collator takes a list of examples or a dict of columns of one length each; got a dict "
                         f"whose columns have lengths {lengths} (fields {sorted(features)})")
    n = next(iter(lengths.values()))
    return [{k: v[i] for k, v in features.items()} for i in range(n)]


def _check_examples(features):
    if not isinstance(features, (list, tuple)) or not features:
        raise ValueError("a collator takes a non-empty list of examples (dicts)")
    keys = None
    for i, f in enumerate(features):
        if not isinstance(f, dict):
            raise TypeError(f"example {i} of the batch is a {type(f).__name__}, not a dict of fields")
        if keys is None:
            keys = set(f)
        elif set(f) != keys:
            raise KeyError(f"example {i} of the batch has fields {sorted(f)}, example 0 has {sorted(keys)}")


def _stack(name, values):
    try:
        return np.stack([np.asarray(v) for v in values])
    except ValueError:
        lengths = sorted({len(v) for v in values if hasattr(v, "__len__")})
        raise ValueError(f"field {name!r} has different lengths in one batch ({lengths[:5]}): use "
                         "DataCollatorWithPadding (or pad the examples to one length)") from None


def default_data_collator(features, return_tensors="np"):
    """Stack each field of equal-length examples (transformers' default_data_collator)."""
    if return_tensors != "np":
        raise ValueError(f"npbert collators return NumPy arrays: return_tensors must be 'np', got {return_tensors!r}")
    features = as_rows(features)
    _check_examples(features)
    features = [_rename_label(f) for f in features]
    return {k: _stack(k, [f[k] for f in features]) for k in features[0]}


def _padded_length(longest, padding, max_length, pad_to_multiple_of):
    if padding in (True, "longest"):
        length = longest
    elif padding == "max_length":
        if max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        length = max_length
    elif padding in (False, "do_not_pad"):
        length = longest
    else:
        raise ValueError(f"padding must be True, 'longest', 'max_length' or False, got {padding!r}")
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    return length


class DataCollatorWithPadding:
    """Pad the sequence fields to the longest example (or max_length), right side."""

    def __init__(self, tokenizer, padding=True, max_length=None, pad_to_multiple_of=None, return_tensors="np"):
        if return_tensors != "np":
            raise ValueError(f"npbert collators return NumPy arrays: return_tensors must be 'np', got {return_tensors!r}")
        self.tokenizer, self.padding, self.max_length, self.pad_to_multiple_of = (
            tokenizer, padding, max_length, pad_to_multiple_of)

    def _pad(self, features):
        features = as_rows(features)
        _check_examples(features)
        features = [_rename_label(f) for f in features]
        if "input_ids" not in features[0]:
            raise KeyError(f"examples need an 'input_ids' field to be padded; they have {sorted(features[0])}")
        longest = max(len(f["input_ids"]) for f in features)
        length = _padded_length(longest, self.padding, self.max_length, self.pad_to_multiple_of)
        if longest > length:
            raise ValueError(f"an example has {longest} tokens, more than max_length={length}: truncate it first")
        pad_values = dict(_PAD_VALUES, input_ids=self.tokenizer.pad_token_id)
        batch = {}
        for key in features[0]:
            values = [f[key] for f in features]
            if key in _SEQUENCE_FIELDS:
                out = np.full((len(values), length), pad_values[key], dtype=np.int64)
                for i, v in enumerate(values):
                    v = np.asarray(v, dtype=np.int64)
                    if key != "input_ids" and len(v) != len(features[i]["input_ids"]):
                        raise ValueError(f"example {i}: {key} has {len(v)} entries, input_ids {len(features[i]['input_ids'])}")
                    out[i, :len(v)] = v
                batch[key] = out
            else:
                batch[key] = _stack(key, values)
        if "attention_mask" not in batch:
            batch["attention_mask"] = (np.arange(length)[None, :] <
                                       np.array([len(f["input_ids"]) for f in features])[:, None]).astype(np.int64)
        return batch

    def __call__(self, features):
        return self._pad(features)


class DataCollatorForTokenClassification(DataCollatorWithPadding):
    """Pad as DataCollatorWithPadding, and the per-token `labels` with label_pad_token_id (-100)."""

    def __init__(self, tokenizer, padding=True, max_length=None, pad_to_multiple_of=None, label_pad_token_id=-100,
                 return_tensors="np"):
        super().__init__(tokenizer, padding, max_length, pad_to_multiple_of, return_tensors)
        self.label_pad_token_id = label_pad_token_id

    def __call__(self, features):
        features = as_rows(features)
        _check_examples(features)
        features = [_rename_label(f) for f in features]
        batch = self._pad([{k: v for k, v in f.items() if k != "labels"} for f in features])
        if "labels" in features[0]:
            labels = [np.asarray(f["labels"], dtype=np.int64) for f in features]
            out = np.full(batch["input_ids"].shape, self.label_pad_token_id, dtype=np.int64)
            for i, v in enumerate(labels):
                if len(v) != len(features[i]["input_ids"]):
                    raise ValueError(f"example {i}: {len(v)} labels for {len(features[i]['input_ids'])} tokens")
                out[i, :len(v)] = v
            batch["labels"] = out
        return batch


class DataCollatorForLanguageModeling(DataCollatorWithPadding):
    """Masked LM batches (BERT, Devlin et al. 2019, 3.1), as transformers' collator:

        chosen ~ Bernoulli(mlm_probability) at every position that is not a special or padding token
        labels = input_ids where chosen, -100 elsewhere
        of the chosen: 80 % -> [MASK], 10 % -> a random token id, 10 % unchanged

    mlm=False: causal LM labels (input_ids, -100 at padding).  Random numbers come from
    `self.rng`, seeded by `seed`."""

    def __init__(self, tokenizer, mlm=True, whole_word_mask=False, mlm_probability=0.15, mask_replace_prob=0.8,
                 random_replace_prob=0.1, pad_to_multiple_of=None, seed=None, return_tensors="np"):
        super().__init__(tokenizer, True, None, pad_to_multiple_of, return_tensors)
        if whole_word_mask and not isinstance(self, DataCollatorForWholeWordMask):
            raise TypeError(unsupported.message("DataCollatorForLanguageModeling()", "whole_word_mask",
                                                "use npbert.training.DataCollatorForWholeWordMask(tokenizer, ...)"))
        if not (0 <= mask_replace_prob <= 1 and 0 <= random_replace_prob <= 1
                and mask_replace_prob + random_replace_prob <= 1):
            raise ValueError(f"mask_replace_prob ({mask_replace_prob}) and random_replace_prob ({random_replace_prob}) "
                             "must be in [0, 1] and sum to at most 1")
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        if mlm and tokenizer.mask_token_id is None:
            raise ValueError("This tokenizer does not have a mask token which is necessary for masked language "
                             "modeling. Use mlm=False for causal language modeling.")
        if not 0.0 <= mlm_probability <= 1.0:
            raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
        self.mlm, self.mlm_probability = mlm, mlm_probability
        self.rng = np.random.default_rng(seed)

    def __call__(self, features):
        batch = self._pad(features)
        special = batch.pop("special_tokens_mask", None)
        if self.mlm:
            batch["input_ids"], batch["labels"] = self.mask_tokens(batch["input_ids"], special)
        else:
            labels = batch["input_ids"].copy()
            labels[batch["attention_mask"] == 0] = -100
            batch["labels"] = labels
        return batch

    def _special_mask(self, input_ids, special):
        if special is None:
            special = np.isin(input_ids, self.tokenizer.all_special_ids)
        special = special.astype(bool)
        return special | (input_ids == self.tokenizer.pad_token_id)

    def mask_tokens(self, input_ids, special_tokens_mask=None):
        """(B, T) ids -> (masked ids, labels), as transformers' torch_mask_tokens."""
        labels = input_ids.copy()
        inputs = input_ids.copy()
        probability = np.full(labels.shape, self.mlm_probability)
        probability[self._special_mask(input_ids, special_tokens_mask)] = 0.0
        masked = self.rng.random(labels.shape) < probability
        return self._apply_80_10_10(inputs, labels, masked)

    def _apply_80_10_10(self, inputs, labels, masked):
        labels[~masked] = -100                                            # loss only on the chosen tokens
        replaced = (self.rng.random(labels.shape) < self.mask_replace_prob) & masked
        inputs[replaced] = self.tokenizer.mask_token_id                   # 80 %: [MASK]
        rest = 1.0 - self.mask_replace_prob                               # of the others, 10 % / 20 % = 0.5
        share = self.random_replace_prob / rest if rest > 0 else 0.0
        randomized = (self.rng.random(labels.shape) < share) & masked & ~replaced
        inputs[randomized] = self.rng.integers(0, len(self.tokenizer), size=labels.shape)[randomized]   # 10 %
        return inputs, labels                                             # 10 %: unchanged


class DataCollatorForWholeWordMask(DataCollatorForLanguageModeling):
    """Masked LM choosing whole words: a word is a token with the "##" pieces after it.  As
    transformers' collator: num_to_predict = min(max_predictions, max(1, round(n * p))) words'
    tokens per sequence, words taken in random order while they fit; then 80/10/10."""

    def __init__(self, tokenizer, mlm_probability=0.15, max_predictions=512, pad_to_multiple_of=None, seed=None,
                 return_tensors="np"):
        super().__init__(tokenizer, True, True, mlm_probability, pad_to_multiple_of=pad_to_multiple_of, seed=seed,
                         return_tensors=return_tensors)
        self.max_predictions = max_predictions

    def _word_mask(self, ids, special):
        tokens = self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])
        words = []
        for pos, tok in enumerate(tokens):
            if special[pos]:
                continue
            if words and tok.startswith("##"):
                words[-1].append(pos)
            else:
                words.append([pos])
        order = self.rng.permutation(len(words))
        n_tokens = sum(len(w) for w in words)
        num_to_predict = min(self.max_predictions, max(1, int(round(n_tokens * self.mlm_probability))))
        chosen = np.zeros(len(ids), dtype=bool)
        count = 0
        for k in order:
            if count >= num_to_predict:
                break
            if count + len(words[k]) > num_to_predict:
                continue
            chosen[words[k]] = True
            count += len(words[k])
        return chosen

    def mask_tokens(self, input_ids, special_tokens_mask=None):
        special = self._special_mask(input_ids, special_tokens_mask)
        masked = np.stack([self._word_mask(row, s) for row, s in zip(input_ids, special)])
        return self._apply_80_10_10(input_ids.copy(), input_ids.copy(), masked)
