"""Ids and tokens back to text, as transformers prints them: `decode`, `batch_decode` and
`convert_tokens_to_string` with transformers' `clean_up_tokenization` (BERT's default
`clean_up_tokenization_spaces=True`), against its Python tokenizer (BertTokenizerLegacy)."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from npbert.tokenization import BertTokenizer  # noqa: E402

pytestmark = pytest.mark.one_path          # decoding: no path involved

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# ids that make clean-ups happen: [PAD] [UNK] [CLS] [SEP] [MASK], . , ? ! ' and the vocabulary's
# n ##t s m ve re t don (2123) can (2064)
INTERESTING = [0, 100, 101, 102, 103, 1012, 1010, 1029, 999, 1005, 1050, 2102, 1055, 1049, 2310, 2128, 1056, 2123,
               2064, 1011, 1006, 1007]
ids = st.lists(st.one_of(st.integers(0, 30521), st.sampled_from(INTERESTING)), max_size=30)


@pytest.fixture(scope="module", params=[True, False], ids=["clean_up", "no_clean_up"])
def pair(request, minilm_dir, reference_class):
    """The tokenizer-level setting as a config or a tutorial would set it."""
    flag = request.param
    return (BertTokenizer.from_pretrained(minilm_dir, clean_up_tokenization_spaces=flag),
            reference_class.from_pretrained(minilm_dir, clean_up_tokenization_spaces=flag))


def test_defaults_are_transformers_python_tokenizers(minilm_dir, reference_class):
    ours, theirs = BertTokenizer.from_pretrained(minilm_dir), reference_class.from_pretrained(minilm_dir)
    assert ours.clean_up_tokenization_spaces is theirs.clean_up_tokenization_spaces is True


@SETTINGS
@given(ids=ids, skip=st.booleans(), clean=st.sampled_from([None, False, True]))
def test_decode_equals_transformers(pair, ids, skip, clean):
    ours, theirs = pair
    kwargs = dict(skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
    assert ours.decode(ids, **kwargs) == theirs.decode(ids, **kwargs)
    assert ours.decode(np.array(ids, dtype=np.int64), **kwargs) == theirs.decode(ids, **kwargs)


@SETTINGS
@given(batch=st.lists(ids, min_size=1, max_size=4), skip=st.booleans(), clean=st.sampled_from([None, False, True]))
def test_batch_decode_equals_transformers(pair, batch, skip, clean):
    ours, theirs = pair
    kwargs = dict(skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
    assert ours.batch_decode(batch, **kwargs) == theirs.batch_decode(batch, **kwargs)
    assert ours.decode(batch, **kwargs) == theirs.decode(batch, **kwargs)
    width = max(len(row) for row in batch)
    if all(len(row) == width for row in batch):                # a (B, T) array
        assert ours.batch_decode(np.array(batch, dtype=np.int64).reshape(len(batch), width), **kwargs) == \
            theirs.batch_decode(batch, **kwargs)


tokens = st.lists(st.one_of(st.sampled_from([".", ",", "?", "!", "'", "n", "##t", "t", "s", "m", "ve", "re", "don",
                                             "##s", "bert", "gp", "##t", "-", "[CLS]", "[SEP]", "2", "0", "+", "##"]),
                            st.text(max_size=4)), max_size=20)


@SETTINGS
@given(tokens=tokens)
def test_convert_tokens_to_string_cleans_up_as_transformers_decode(pair, tokens):
    """transformers' Python tokenizer cleans up in `decode` only; npbert's
    `convert_tokens_to_string` applies the same clean-up when `clean_up_tokenization_spaces` is
    on, so that it prints what `decode` prints for the same tokens (and what the tutorials, run
    on transformers' Rust tokenizer, print)."""
    ours, theirs = pair
    joined = theirs.convert_tokens_to_string(tokens)
    expected = theirs.clean_up_tokenization(joined) if theirs.clean_up_tokenization_spaces else joined
    assert ours.convert_tokens_to_string(tokens) == expected
    if all(t in theirs.vocab for t in tokens):
        assert ours.convert_tokens_to_string(tokens) == theirs.decode(theirs.convert_tokens_to_ids(tokens))


def test_the_tutorial_strings(minilm_dir):
    """Seed 001's SQuAD answers and the issue's example, through convert_tokens_to_string: what
    transformers' AutoTokenizer printed there."""
    tok = BertTokenizer.from_pretrained(minilm_dir)
    for text, printed in [("bert, gpt", "bert, gpt"), ("TensorFlow 2.0 and PyTorch", "tensorflow 2. 0 and pytorch"),
                          ("general-purpose architectures", "general - purpose architectures"),
                          ("over 32+", "over 32 +")]:
        assert tok.convert_tokens_to_string(tok.tokenize(text)) == printed
    tok.clean_up_tokenization_spaces = False
    assert tok.convert_tokens_to_string(tok.tokenize("bert, gpt")) == "bert , gpt"


@pytest.fixture(scope="module")
def rust_and_ours(minilm_dir):
    transformers = pytest.importorskip("transformers")
    rust = transformers.BertTokenizer.from_pretrained(minilm_dir)
    assert rust.is_fast
    return rust, BertTokenizer.from_pretrained(minilm_dir)


@SETTINGS
@given(ids=st.lists(st.one_of(st.integers(999, 30521), st.sampled_from([1012, 1010, 1029, 999, 1011, 2123, 1050])),
                    max_size=30))
def test_convert_tokens_to_string_equals_the_rust_tokenizers_without_apostrophes(rust_and_ours, ids):
    """transformers' Rust tokenizer (AutoTokenizer) cleans up per token in its WordPiece decoder,
    so the clean-ups that span tokens (' n't 's ...) are not made there; for tokens without an
    apostrophe the two agree."""
    rust, ours = rust_and_ours
    tokens = [t for t in ours.convert_ids_to_tokens(ids) if "'" not in t]
    assert ours.convert_tokens_to_string(tokens) == rust.convert_tokens_to_string(tokens)
