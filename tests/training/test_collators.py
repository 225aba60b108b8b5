"""Collators: padding, MLM masking proportions and rules, whole-word masking, against transformers."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npbert.training import (DataCollatorForLanguageModeling, DataCollatorForTokenClassification,
                             DataCollatorForWholeWordMask, DataCollatorWithPadding, default_data_collator)
from training_helpers import VOCAB, tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return tokenizer(tmp_path_factory.mktemp("vocab"))


examples = st.lists(st.lists(st.integers(5, len(VOCAB) - 1), min_size=1, max_size=12), min_size=1, max_size=6).map(
    lambda rows: [{"input_ids": [2] + r + [3]} for r in rows])


@settings(max_examples=60, deadline=None)
@given(batch=examples, seed=st.integers(0, 2 ** 16))
def test_mlm_never_chooses_special_or_padding_and_labels_are_minus_100_elsewhere(tok, batch, seed):
    out = DataCollatorForLanguageModeling(tok, seed=seed)(batch)
    original = DataCollatorWithPadding(tok)(batch)["input_ids"]
    special = np.isin(original, [0, 1, 2, 3, 4])
    labels, ids = out["labels"], out["input_ids"]
    assert np.all(labels[special] == -100)
    assert np.all(ids[special] == original[special])                 # special and padding tokens untouched
    chosen = labels != -100
    assert np.array_equal(labels[chosen], original[chosen])          # a label is the original token
    assert np.array_equal(ids[~chosen], original[~chosen])           # nothing else changed
    assert out["attention_mask"].shape == ids.shape


def test_mlm_proportions_15_and_80_10_10(tok):
    """Over 40000 maskable tokens: the chosen fraction, and among the chosen the [MASK],
    random and kept fractions, within 5 binomial standard deviations of 15 %, 80/10/10.
    (The random 10 % may draw the original token by chance, 1/26 of the time: counted as kept.)"""
    rng = np.random.default_rng(0)
    batch = [{"input_ids": [2] + rng.integers(5, len(VOCAB), 38).tolist() + [3]} for _ in range(1000)]
    out = DataCollatorForLanguageModeling(tok, seed=1)(batch)
    original = DataCollatorWithPadding(tok)(batch)["input_ids"]
    maskable = ~np.isin(original, [0, 1, 2, 3, 4])
    chosen = out["labels"] != -100
    n = maskable.sum()
    p = chosen.sum() / n
    assert abs(p - 0.15) < 5 * np.sqrt(0.15 * 0.85 / n)
    c = chosen.sum()
    as_mask = (out["input_ids"][chosen] == 4).mean()
    kept = (out["input_ids"][chosen] == original[chosen]).mean()
    random_ = 1 - as_mask - kept
    v = len(VOCAB)
    expect_kept = 0.1 + 0.1 / v
    for got, want in ((as_mask, 0.8), (kept, expect_kept), (random_, 0.1 - 0.1 / v)):
        assert abs(got - want) < 5 * np.sqrt(want * (1 - want) / c), (got, want)


def test_whole_word_masking_masks_words_together(tok):
    ids = [VOCAB.index(t) for t in ["king", "##s", "##ed", "speak", "##ing", "rose", "##s", "the", "sword"]]
    batch = [{"input_ids": [2] + ids * 3 + [3]} for _ in range(50)]
    out = DataCollatorForWholeWordMask(tok, mlm_probability=0.3, seed=0)(batch)
    words = []
    for row_labels in out["labels"]:
        pieces = row_labels[1:-1]
        toks = [VOCAB[i] for i in ids * 3]
        start = 0
        for j in range(1, len(toks) + 1):
            if j == len(toks) or not toks[j].startswith("##"):
                chosen = pieces[start:j] != -100
                assert chosen.all() or not chosen.any()           # a word is chosen whole or not at all
                words.append(chosen.all())
                start = j
        n_tokens = len(toks)
        assert (pieces != -100).sum() <= round(n_tokens * 0.3)
    assert 0 < np.mean(words) < 1


def test_padding_and_token_classification_collators(tok):
    batch = [{"input_ids": [2, 5, 6, 3], "token_type_ids": [0, 0, 0, 0], "label": 1},
             {"input_ids": [2, 7, 3], "token_type_ids": [0, 0, 0], "label": 0}]
    out = DataCollatorWithPadding(tok, pad_to_multiple_of=8)(batch)
    assert out["input_ids"].tolist() == [[2, 5, 6, 3, 0, 0, 0, 0], [2, 7, 3, 0, 0, 0, 0, 0]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]
    assert out["labels"].tolist() == [1, 0]
    tc = DataCollatorForTokenClassification(tok)([{"input_ids": [2, 5, 3], "labels": [-100, 4, -100]},
                                                  {"input_ids": [2, 3], "labels": [-100, -100]}])
    assert tc["labels"].tolist() == [[-100, 4, -100], [-100, -100, -100]]
    with pytest.raises(ValueError, match="DataCollatorWithPadding"):
        default_data_collator([{"input_ids": [1, 2]}, {"input_ids": [1]}])
    with pytest.raises(KeyError, match="example 1 of the batch has fields"):
        DataCollatorWithPadding(tok)([{"input_ids": [2]}, {"input_ids": [2], "label": 0}])
    with pytest.raises(ValueError, match="2 labels for 3 tokens"):
        DataCollatorForTokenClassification(tok)([{"input_ids": [2, 5, 3], "labels": [0, 1]}])


def test_same_structure_as_transformers_collators(tok, tmp_path):
    """transformers' collators on the same examples: the same keys, shapes and padding; the
    masked positions differ (other random generators) but follow the same rules."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    theirs_tok = BertTokenizerLegacy(str(tmp_path / "vocab.txt"))
    batch = [{"input_ids": [2, 5, 6, 7, 3]}, {"input_ids": [2, 8, 3]}]
    for ours, theirs in ((DataCollatorWithPadding(tok), transformers.DataCollatorWithPadding(theirs_tok, return_tensors="np")),
                         (DataCollatorForLanguageModeling(tok, seed=0),
                          transformers.DataCollatorForLanguageModeling(theirs_tok, return_tensors="np"))):
        a, b = ours(batch), theirs(batch)
        assert set(a) == set(b)
        for k in a:
            assert a[k].shape == b[k].shape, k
        assert np.array_equal(a["attention_mask"], b["attention_mask"])
