"""return_overflowing_tokens=True as transformers' Rust tokenizer answers it (npbert's default,
is_fast True): a row per window, `overflow_to_sample_mapping`, `stride` tokens shared, windows from
the end with truncation_side="left", a longest_first pair shared as the tokenizers library does.
Compared with transformers 5's `BertTokenizer` (the Rust one) on the same vocabulary; use_fast=False
keeps the Python tokenizer's form (tests/tokenization/test_reference.py compares that one)."""
import pytest

from npbert.tokenization import BertTokenizer

A = "one two three four five six seven eight nine ten eleven"
B = "Short text here, isn't it?"
CASES = [
    ((A,), dict(max_length=6, truncation=True, stride=1)),
    (([A, B, "x"],), dict(max_length=7, truncation=True, stride=2, padding=True, return_offsets_mapping=True,
                          return_special_tokens_mask=True, return_length=True)),
    (([B, A], [A, B]), dict(max_length=17, truncation="only_second", stride=2, return_offsets_mapping=True)),
    (([A, A], [B, B]), dict(max_length=14, truncation="only_first", stride=0)),
    (([A + " " + A], [B + " " + B]), dict(max_length=9, truncation="longest_first", stride=1)),   # both cut
    ((["q one two"], [A]), dict(max_length=9, truncation="longest_first", stride=1)),
    (([A],), dict(max_length=6, truncation=True, stride=1, add_special_tokens=False)),
    (([A, B],), dict(max_length=8, truncation=True, stride=1, padding="max_length", return_tensors="np")),
    (([B, "x"],), dict(max_length=64, truncation=True, stride=3)),                                   # nothing cut
]


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else value


@pytest.fixture(scope="module")
def rust_and_ours(minilm_dir):
    transformers = pytest.importorskip("transformers")
    rust = transformers.BertTokenizer.from_pretrained(minilm_dir)
    if not rust.is_fast:
        pytest.skip("transformers' BertTokenizer is the Rust one from 5.x on")
    return rust, BertTokenizer.from_pretrained(minilm_dir)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_windows_equal_the_rust_tokenizer(rust_and_ours, side, case):
    rust, ours = rust_and_ours
    args, options = CASES[case]
    rust.truncation_side = ours.truncation_side = side
    try:
        expected = rust(*args, return_overflowing_tokens=True, **options)
        got = ours(*args, return_overflowing_tokens=True, **options)
    finally:
        rust.truncation_side = ours.truncation_side = "right"
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert _plain(got[key]) == _plain(expected[key]), key
    for row in range(len(expected["input_ids"])):        # the alignment methods follow the windows
        assert got.word_ids(row) == expected.word_ids(row)
        assert got.sequence_ids(row) == expected.sequence_ids(row)


def test_a_window_too_small_for_the_stride_is_an_error(minilm_dir):
    """(transformers' Rust tokenizer panics here; npbert says what to change)"""
    tok = BertTokenizer.from_pretrained(minilm_dir)
    with pytest.raises(ValueError, match="stride=4 must be smaller than the tokens a window holds"):
        tok(A, max_length=6, truncation=True, stride=4, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="leaves no room for the second sequence"):
        tok(A, B, max_length=10, truncation="only_second", return_overflowing_tokens=True)


def test_use_fast_false_keeps_the_python_form(minilm_dir, reference_class):
    ours = BertTokenizer.from_pretrained(minilm_dir, use_fast=False)
    theirs = reference_class.from_pretrained(minilm_dir)
    assert ours.is_fast is False and BertTokenizer.from_pretrained(minilm_dir).is_fast is True
    options = dict(max_length=6, truncation=True, stride=1, return_overflowing_tokens=True)
    got, expected = ours(A, **options), theirs(A, **options)
    assert "overflow_to_sample_mapping" not in got
    assert got["input_ids"] == expected["input_ids"]
    assert got["overflowing_tokens"] == expected["overflowing_tokens"]
    assert got["num_truncated_tokens"] == expected["num_truncated_tokens"]
