"""Input batches shared by test folders (tests/ is on sys.path, tests/conftest.py)."""
import numpy as np


def pair_and_single(first, second, single, seed=0):
    """Two rows of BERT-vocabulary ids (random word ids 1000..29999, [CLS] = 101, [SEP] = 102,
    [PAD] = 0): a pair [CLS] a [SEP] b [SEP] of `first` and `second` words with token types 0/1,
    and one sentence [CLS] s [SEP] of `single` words padded to the pair's length.  Returns the
    model's keyword arguments input_ids, token_type_ids, attention_mask, (2, T) int64 each."""
    rng = np.random.default_rng(seed)
    T = first + second + 3
    ids = np.zeros((2, T), dtype=np.int64)
    ids[0] = [101, *rng.integers(1000, 30000, first), 102, *rng.integers(1000, 30000, second), 102]
    ids[1, :single + 2] = [101, *rng.integers(1000, 30000, single), 102]
    types = np.zeros_like(ids)
    types[0, first + 2:] = 1
    return dict(input_ids=ids, token_type_ids=types, attention_mask=(ids != 0).astype(np.int64))
