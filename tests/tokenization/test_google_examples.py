"""google-research/bert's tokenization_test.py examples (and the accent /
never_split cases of transformers' test_tokenization_bert.py): small inline
vocabularies, expected tokens written out by hand."""
import pytest

from npbert.tokenization import BasicTokenizer, BertTokenizer, WordpieceTokenizer
from npbert.tokenization.chars import is_control, is_punctuation, is_whitespace

from tokenizer_helpers import write_vocab

GOOGLE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


def google_tokenizer(tmp_path, **kwargs):
    # google's vocab has no [PAD] / [MASK]; npbert insists special tokens be in the vocab
    return BertTokenizer(write_vocab(tmp_path, GOOGLE_VOCAB), pad_token=None, mask_token=None, **kwargs)


def test_full_tokenizer(tmp_path):
    tokenizer = google_tokenizer(tmp_path)
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]


def test_chinese():
    assert BasicTokenizer().tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tokenizer = BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]


@pytest.mark.parametrize(
    "do_lower_case, strip_accents, expected, expected_hello",
    [
        (True, False, ["hällo", "!", "how", "are", "you", "?"], ["h\u00E9llo"]),
        (True, True, ["hallo", "!", "how", "are", "you", "?"], ["hello"]),
        (True, None, ["hallo", "!", "how", "are", "you", "?"], ["hello"]),
        (False, True, ["HaLLo", "!", "how", "Are", "yoU", "?"], None),
        (False, False, ["HäLLo", "!", "how", "Are", "yoU", "?"], None),
    ],
)
def test_strip_accents_interplay(do_lower_case, strip_accents, expected, expected_hello):
    tokenizer = BasicTokenizer(do_lower_case=do_lower_case, strip_accents=strip_accents)
    assert tokenizer.tokenize(" \tHäLLo!how  \n Are yoU?  ") == expected
    if expected_hello is not None:
        assert tokenizer.tokenize("H\u00E9llo") == expected_hello


def test_basic_tokenizer_respects_never_split():
    tokenizer = BasicTokenizer(do_lower_case=False, never_split=["[UNK]"])
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU? [UNK]") == ["HeLLo", "!", "how", "Are", "yoU", "?", "[UNK]"]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(GOOGLE_VOCAB[:-1])}
    tokenizer = WordpieceTokenizer(vocab=vocab, unk_token="[UNK]")
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_wordpiece_max_input_chars_per_word():
    vocab = {"[UNK]": 0, "a": 1, "##a": 2}
    tokenizer = WordpieceTokenizer(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    assert tokenizer.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert tokenizer.tokenize("a" * 101) == ["[UNK]"]


def test_convert_tokens_to_ids(tmp_path):
    tokenizer = google_tokenizer(tmp_path)
    assert tokenizer.convert_tokens_to_ids(["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]
    assert tokenizer.convert_tokens_to_ids("nonsense") == 0  # unknown -> [UNK]


def test_is_whitespace():
    for ch in [" ", "\t", "\r", "\n", "\u00A0"]:
        assert is_whitespace(ch)
    for ch in ["A", "-"]:
        assert not is_whitespace(ch)


def test_is_control():
    assert is_control("\u0005")
    for ch in ["A", " ", "\t", "\r", "\U0001F4A9"]:
        assert not is_control(ch)


def test_is_punctuation():
    for ch in ["-", "$", "`", "."]:
        assert is_punctuation(ch)
    for ch in ["A", " "]:
        assert not is_punctuation(ch)


def test_special_tokens_around_sequences(tmp_path):
    tokenizer = google_tokenizer(tmp_path)
    assert tokenizer.encode("unwanted running") == [1, 7, 4, 5, 8, 9, 2]
    assert tokenizer.encode("un", "running") == [1, 7, 2, 8, 9, 2]
    assert tokenizer("un", "running", return_token_type_ids=True)["token_type_ids"] == [0, 0, 0, 1, 1, 1]
