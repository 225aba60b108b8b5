"""BatchEncoding (the dict the tokenizer returns) and the small conversions around it."""
import numpy as np

# transformers' "no limit" model_max_length, and the bound above which a model_max_length
# counts as "no limit".
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)

PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")
TRUNCATION_STRATEGIES = ("only_first", "only_second", "longest_first", "do_not_truncate")


class BatchEncoding(dict):
    """The dict `__call__` returns; keys are also attributes (`enc.input_ids`)."""

    _word_ids = None

    def word_ids(self, batch_index=0):
        """The word index of each token of row `batch_index` (None for [CLS], [SEP], padding),
        as transformers' fast tokenizers: see npbert/tokenization/extras.py."""
        if self._word_ids is None:
            raise ValueError("word_ids() is available on encodings made by the tokenizer's __call__ "
                             "(not on a dict built by hand or by pad())")
        if not 0 <= batch_index < len(self._word_ids):
            raise IndexError(f"word_ids(batch_index={batch_index}): the encoding has {len(self._word_ids)} row(s)")
        return list(self._word_ids[batch_index])

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


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
