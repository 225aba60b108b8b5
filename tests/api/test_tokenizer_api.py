"""The tokenizer API a tutorial reader reaches for (issue 10)."""
import numpy as np
import pytest

from npbert.tokenization import BertTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
         "##s", "run", "play", "new", "york", "is", "big"]


@pytest.fixture
def tok(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return BertTokenizer(str(tmp_path / "vocab.txt"))


def test_pairs_get_token_type_ids_by_default(tok):
    enc = tok("the cat sat", "a dog")
    assert list(enc) == ["input_ids", "token_type_ids", "attention_mask"]   # transformers' key order
    assert enc["token_type_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
    assert tok("the cat", return_token_type_ids=False).keys() == {"input_ids", "attention_mask"}


def test_token_type_ids_equal_transformers_bert_tokenizer(tmp_path):
    """transformers.BertTokenizer (the class users import; Rust in 5.x) on the same vocabulary."""
    transformers = pytest.importorskip("transformers")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    ours = BertTokenizer(str(tmp_path / "vocab.txt"))
    theirs = transformers.BertTokenizer(str(tmp_path / "vocab.txt"))
    for args in (("the cat sat",), ("the cat sat", "a dog runs"), (["the cat", "new york"], ["is big", "a"])):
        assert dict(ours(*args)) == dict(theirs(*args)), args


def _rust(tmp_path):
    transformers = pytest.importorskip("transformers")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return transformers.BertTokenizer(str(tmp_path / "vocab.txt"))


WORD_CASES = [
    ((["The", "cat,", "sat"],), dict(is_split_into_words=True)),
    (([["the", "dogs"], ["New", "York", "is", "big!"]],), dict(is_split_into_words=True, padding=True)),
    ((["the", "cats", "sat", "on"], ["a", "mat"]), dict(is_split_into_words=True, truncation=True, max_length=8)),
    (("the cats, sat on a big-mat",), {}),
    ((["the dogs run", "new york"], ["a cat", "the mat is big"]), dict(padding=True)),
]


@pytest.mark.parametrize("args,kwargs", WORD_CASES)
def test_word_ids_and_split_words_equal_transformers(tok, tmp_path, args, kwargs):
    """is_split_into_words=True and word_ids() as transformers' BertTokenizer (fast)."""
    theirs = _rust(tmp_path)
    a, b = tok(*args, **kwargs), theirs(*args, **kwargs)
    assert dict(a) == dict(b)
    rows = len(a["input_ids"]) if isinstance(a["input_ids"][0], list) else 1
    for i in range(rows):
        assert a.word_ids(i) == b.word_ids(i), i


def test_split_words_with_arrays(tok):
    enc = tok([["the", "dogs"], ["new"]], is_split_into_words=True, padding=True, return_tensors="np")
    assert enc["input_ids"].shape == (2, 5)                       # [CLS] the dog ##s [SEP]
    assert enc.word_ids(0) == [None, 0, 1, 1, None]
    assert enc.word_ids(1) == [None, 0, None, None, None]


def test_ragged_arrays_are_an_error_naming_padding(tok):
    with pytest.raises(ValueError, match="padding=True"):
        tok(["the cat", "a dog sat on"], return_tensors="np")


def test_tokenize_with_special_tokens(tok, tmp_path):
    theirs = _rust(tmp_path)
    for kw in ({}, {"add_special_tokens": True}, {"add_special_tokens": False}):
        assert tok.tokenize("the cats sat", **kw) == theirs.tokenize("the cats sat", **kw), kw


def test_encode_plus_and_batch_encode_plus_are_the_call(tok):
    assert tok.encode_plus("the cat", "a dog", max_length=5, truncation=True) == \
        tok("the cat", "a dog", max_length=5, truncation=True)
    assert tok.batch_encode_plus([("the cat", "a dog"), "new york"], padding=True) == \
        tok([("the cat", "a dog"), "new york"], padding=True)
    with pytest.raises(ValueError, match="batch_encode_plus"):
        tok.encode_plus(["the cat", "a dog"])


def test_pad_as_transformers(tok, tmp_path):
    theirs = _rust(tmp_path)
    features = [tok("the cat sat"), tok("a dog")]
    for kw in ({}, {"return_tensors": "np"}, {"padding": "max_length", "max_length": 7},
               {"pad_to_multiple_of": 4, "return_tensors": "np"}):
        a, b = tok.pad(features, **kw), theirs.pad(features, **kw)
        assert set(a) == set(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{k} {kw}")
    with pytest.raises(ValueError, match="input_ids"):
        tok.pad([{"attention_mask": [1]}])
