"""The fast-tokenizer methods of BatchEncoding (tokens, word_ids, sequence_ids, token_to_*, word_to_*,
char_to_*) against transformers' Rust BertTokenizer on the same inputs: every token, word and
character index of every row, for singles, pairs, batches, padding (both sides) and truncation."""
import copy
import pickle

import numpy as np
import pytest

from npbert.tokenization import BertTokenizer

TEXTS = ["Hello, don't [MASK] world!", "A much longer [SEP] sentence here, with İstanbul and café.",
         "中国人民 mixed中English", "", "   ", "unaffable melodically best-selling e\u0301cole"]
PAIRS = ["Second text", "x y", "z", "naïve 123,456", "", "[CLS] typed"]

CASES = [
    ((TEXTS[0],), {}),
    ((TEXTS[1], PAIRS[3]), {}),
    ((TEXTS,), dict(padding=True)),
    ((TEXTS, PAIRS), dict(padding=True, padding_side="left")),
    ((TEXTS, PAIRS), dict(add_special_tokens=False, padding=True)),
    ((TEXTS, PAIRS), dict(truncation="only_first", max_length=9, padding="max_length")),
    ((TEXTS, PAIRS), dict(truncation=True, max_length=10, return_tensors="np", padding=True)),
    ((TEXTS,), dict(truncation=True, max_length=5)),
    ((TEXTS[2],), dict(return_tensors="np")),
    ((["Hello", "world", "!!", "naïve"],), dict(is_split_into_words=True)),
    (([["Hello", "world"], ["x"]], [["a"], ["b", "c", "unaffable"]]), dict(is_split_into_words=True, padding=True)),
]


@pytest.fixture(scope="module")
def tokenizers(minilm_dir):
    transformers = pytest.importorskip("transformers")
    rust = transformers.BertTokenizer.from_pretrained(minilm_dir)
    assert rust.is_fast
    return BertTokenizer.from_pretrained(minilm_dir), rust


def _rows(encoding):
    ids = encoding["input_ids"]
    return [list(map(int, r)) for r in ids] if not isinstance(ids[0], (int, np.integer)) else [list(ids)]


def _theirs(function, *args):
    try:
        return function(*args)
    except TypeError:   # transformers' word_to_chars on a word with no tokens: CharSpan(*None)
        return None


@pytest.mark.parametrize("args,kwargs", CASES)
def test_alignment_methods_equal_the_rust_tokenizers(tokenizers, args, kwargs):
    ours, rust = tokenizers
    a, b = ours(*args, **kwargs), rust(*args, **kwargs)
    assert a.is_fast and ours.is_fast
    words = kwargs.get("is_split_into_words", False)
    compared = 0
    for i, (ids_a, ids_b) in enumerate(zip(_rows(a), _rows(b))):
        if ids_a != ids_b:     # Python and Rust truncate a pair of equal lengths differently: not compared
            assert kwargs.get("truncation")
            continue
        compared += 1
        assert a.tokens(i) == b.tokens(i)
        assert a.word_ids(i) == b.word_ids(i)
        assert a.sequence_ids(i) == b.sequence_ids(i)
        n_tokens = len(ids_a)
        for t in range(n_tokens + 2):
            assert a.token_to_word(i, t) == b.token_to_word(i, t), t
            assert a.token_to_sequence(i, t) == b.token_to_sequence(i, t), t
            if not words:
                assert a.token_to_chars(i, t) == b.token_to_chars(i, t), t
        for s in range(b.n_sequences):
            for w in range(n_tokens + 1):
                assert a.word_to_tokens(i, w, s) == b.word_to_tokens(i, w, s), (w, s)
                if not words:
                    assert a.word_to_chars(i, w, s) == _theirs(b.word_to_chars, i, w, s), (w, s)
            if not words:
                for c in range(70):
                    assert a.char_to_token(i, c, s) == b.char_to_token(i, c, s), (c, s)
                    assert a.char_to_word(i, c, s) == b.char_to_word(i, c, s), (c, s)
        if i == 0:      # the one-argument forms are row 0's
            assert a.tokens() == b.tokens() and a.word_ids() == b.word_ids()
            assert [a.token_to_word(t) for t in range(n_tokens)] == [b.token_to_word(t) for t in range(n_tokens)]
            assert a.word_to_tokens(0) == b.word_to_tokens(0)
            if not words:
                assert a.char_to_token(1) == b.char_to_token(1) and a.token_to_chars(1) == b.token_to_chars(1)
    assert compared >= 1
    assert a.n_sequences == b.n_sequences


def test_a_typed_special_token_is_a_word_as_in_rust(tokenizers):
    ours, rust = tokenizers
    text = "don't stop [SEP] now"
    assert ours(text).word_ids() == rust(text).word_ids() == [None, 0, 1, 2, 3, 4, 5, None]


def test_chapter_6_of_the_course(tokenizers):
    """The fast-tokenizer section of the Hugging Face course, as written (its numbers)."""
    ours, _ = tokenizers
    example = "My name is Sylvain and I work at Hugging Face in Brooklyn."
    encoding = ours(example)
    assert ours.is_fast and encoding.is_fast
    assert encoding.tokens()[:6] == ["[CLS]", "my", "name", "is", "sy", "##lva"]
    assert encoding.word_ids()[:7] == [None, 0, 1, 2, 3, 3, 3]
    start, end = encoding.word_to_chars(3)
    assert example[start:end] == "Sylvain"


def test_bad_indices_are_clear_errors(tokenizers):
    ours, _ = tokenizers
    enc = ours(["a b", "c"], ["d", "e f"], padding=True)
    assert enc.tokens(-1) == enc.tokens(1) and enc.token_to_word(1, -2) == enc.token_to_word(1, len(enc.tokens(1)) - 2)
    with pytest.raises(IndexError, match="has 2 row"):
        enc.tokens(2)
    with pytest.raises(ValueError, match="sequence_index=2"):
        enc.word_to_tokens(0, 0, sequence_index=2)
    with pytest.raises(ValueError, match="one sequence"):
        ours("a b").char_to_token(0, sequence_index=1)
    with pytest.raises(ValueError, match="char_index must be >= 0"):
        enc.char_to_token(0, -1)
    with pytest.raises(TypeError, match="token_index must be an int"):
        enc.token_to_word(0, "1")
    words = ours(["a", "b"], is_split_into_words=True)
    with pytest.raises(ValueError, match="is_split_into_words"):
        words.char_to_token(0)
    padded = ours.pad([{"input_ids": [101, 102]}])
    assert not padded.is_fast
    with pytest.raises(ValueError, match="__call__"):
        padded.word_ids()


def test_an_encoding_whose_ids_no_longer_match_says_so(tokenizers):
    ours, _ = tokenizers
    enc = ours("hello world")
    enc["input_ids"][1] = 0
    with pytest.raises(ValueError, match="no longer matches"):
        enc.tokens()


def test_pickle_and_deepcopy_keep_the_alignment_without_the_tokenizer(tokenizers):
    ours, _ = tokenizers
    enc = ours(["Hello world", "x"], ["a", "b c"], padding=True, return_tensors="np")
    for other in (pickle.loads(pickle.dumps(enc)), copy.deepcopy(enc)):
        assert other._alignment.tokenizer is None
        assert [other.word_ids(i) for i in range(2)] == [enc.word_ids(i) for i in range(2)]
        assert other.char_to_token(0, 7) == enc.char_to_token(0, 7) == 2


def test_to_device(tokenizers):
    ours, _ = tokenizers
    enc = ours("hello", return_tensors="np")
    assert enc.to("cpu") is enc and enc.to("cpu:0") is enc
    with pytest.raises(RuntimeError, match="CPU only"):
        enc.to("cuda")
    with pytest.raises(RuntimeError, match="CPU only"):
        enc.to(0)
    torch = pytest.importorskip("torch")
    assert enc.to(torch.device("cpu")) is enc
    with pytest.raises(RuntimeError, match="CPU only"):
        enc.to(torch.device("cuda"))
    with pytest.warns(UserWarning, match="not supported"):
        assert enc.to(torch.float16) is enc
