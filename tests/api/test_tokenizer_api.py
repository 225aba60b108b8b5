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
