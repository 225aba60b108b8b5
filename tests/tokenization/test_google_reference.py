"""npbert's tokenizer against google-research/bert's `tokenization.FullTokenizer`
(bert-tensorflow 1.0.4), on random Unicode, on both npbert paths (see conftest.py).

Google's tokenizer is transformers' without three later additions, so the comparison sets them
aside: the text is given in NFC after cleaning (Google has no NFC step), holds no special token
(Google splits "[SEP]" typed in a text like any other word), and words may have 200 characters
(Google's max_input_chars_per_word; transformers' is 100).
"""
import unicodedata

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import google_reference  # noqa: E402
from npbert.testing import texts as tokenizer_texts  # noqa: E402
from npbert.tokenization import BasicTokenizer, BertTokenizer  # noqa: E402

SPECIALS = ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]")
texts = st.one_of(
    tokenizer_texts(),
    st.text(st.sampled_from("ab#-é"), min_size=90, max_size=240),          # around 100 and 200 characters
    st.lists(st.sampled_from(["Hello", "unaffable", "UNwant\u00e9d,running", "İstanbul", "中文", "e\u0301",
                              "\u00a0", "ΣΑΣ", "[sep]", "naïve", "\uf900"]), max_size=10).map(" ".join),
)


def as_google_reads_it(text):
    """Cleaned, then NFC: the text on which Google's missing NFC step changes nothing."""
    return unicodedata.normalize("NFC", BasicTokenizer()._clean_text(text))


@pytest.fixture(scope="module")
def google_tokenization():
    return google_reference.load("tokenization")


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, minilm_dir, google_tokenization):
    vocab_file = f"{minilm_dir}/vocab.txt"
    ours = BertTokenizer(vocab_file, do_lower_case=request.param, max_input_chars_per_word=200)
    google = google_tokenization.FullTokenizer(vocab_file, do_lower_case=request.param)
    assert google.vocab == ours.vocab        # the same ids: Google strips each line, transformers does not
    return ours, google


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_tokens_and_ids_equal_googles(pair, text):
    ours, google = pair
    text = as_google_reads_it(text)
    hypothesis.assume(not any(s in text for s in SPECIALS))
    tokens = google.tokenize(text)
    assert ours.tokenize(text) == tokens
    assert ours.basic_tokenizer.tokenize(text) == google.basic_tokenizer.tokenize(text)
    assert ours.encode(text, add_special_tokens=False) == google.convert_tokens_to_ids(tokens)


def test_googles_own_examples(pair):
    ours, google = pair
    for text in ["UNwant\u00e9d,running", " \tHeLLo!how  \n Are yoU?  ", "ah\u535a\u63a8zz", "H\u00e9llo",
                 "a" * 150, "a" * 201, "124443286539 melodically best-selling"]:
        assert ours.tokenize(text) == google.tokenize(text), text
