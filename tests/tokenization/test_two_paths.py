"""The fast path (one regex pass, a cache per raw word, an ASCII shortcut, spans carried through
every step) gives exactly what the reference path (Google's and transformers' steps, plain)
gives: tokens, ids, and every `__call__` output, offsets included, on random Unicode and for
every combination of options.  The last test breaks one fast step on purpose and checks that the
equality test notices."""
import functools
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import npbert  # noqa: E402
from npbert.testing import texts as tokenizer_texts  # noqa: E402

import test_hypothesis  # noqa: E402
import tokenizer_helpers  # noqa: E402
from npbert.testing import vocabularies  # noqa: E402
from npbert.tokenization import BertTokenizer, aligned  # noqa: E402

from tokenizer_helpers import write_vocab  # noqa: E402

pytestmark = pytest.mark.one_path          # each test runs both paths itself

texts = st.one_of(
    tokenizer_texts(),
    st.text(st.sampled_from("ab#-é"), min_size=90, max_size=140),      # around max_input_chars_per_word
    st.lists(st.sampled_from(["hello", "Hello", "HELLO", "hello,", "[foo]", "ǅ", "unaffable", " ", "İ", "e\u0301",
                              "[SEP]", "[CLS]", "[UNK]", "[sep]", "##", "\x00", "\u200b", "中文", "\u3000", "ΣΑΣ"]),
             max_size=12).map("".join),
)

# the 24 BasicTokenizer option sets of test_hypothesis, do_basic_tokenize=False, and more
OPTIONS = [o for o in test_hypothesis.OPTIONS if "do_basic_tokenize" not in o]
NEVER_SPLIT = test_hypothesis.NEVER_SPLIT
OPTIONS += [dict(do_basic_tokenize=False), dict(do_basic_tokenize=False, never_split=NEVER_SPLIT),
            dict(max_input_chars_per_word=5), dict(additional_special_tokens=["hello", "[unused1]"])]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tokenizers(minilm_dir):
    return functools.lru_cache(maxsize=None)(lambda index: BertTokenizer.from_pretrained(minilm_dir, **OPTIONS[index]))


def on_both_paths(function):
    """(result on the fast path, result on the reference path); an exception is a result too
    (its type and message)."""
    results = []
    for path in ("fast", "reference"):
        with npbert.using_path(path), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                results.append(_plain(function()))
            except Exception as error:  # noqa: BLE001  (the same error on both paths is a result)
                results.append(("raised", type(error).__name__, str(error)))
    return results


def _plain(value):
    """A BatchEncoding (arrays, word_ids) -> comparable plain values."""
    if isinstance(value, dict):
        alignment = getattr(value, "_alignment", None)
        rows = [] if alignment is None else range(len(alignment))
        return {k: _plain(v) for k, v in value.items()}, [(value.word_ids(b), value.sequence_ids(b)) for b in rows]
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tolist()
    return value


def assert_same_tokens(tok, text):
    fast, reference = on_both_paths(lambda: tok.tokenize(text))
    assert fast == reference, text
    fast, reference = on_both_paths(lambda: tok.basic_tokenizer.tokenize(text))
    assert fast == reference, text
    fast, reference = on_both_paths(lambda: tok.wordpiece_tokenizer.tokenize(text))
    assert fast == reference, text
    fast, reference = on_both_paths(lambda: tok.encode(text, add_special_tokens=False))
    assert fast == reference, text


@SETTINGS
@given(text=texts, option=st.sampled_from(range(len(OPTIONS))))
def test_tokens_and_ids_equal_on_both_paths(tokenizers, text, option):
    assert_same_tokens(tokenizers(option), text)


call_options = tokenizer_helpers.call_options(offsets=True)


@SETTINGS
@given(first=texts, second=st.none() | texts, batch=st.booleans(), kwargs=call_options,
       option=st.sampled_from(range(len(OPTIONS))))
def test_call_outputs_equal_on_both_paths(tokenizers, first, second, batch, kwargs, option):
    """Padding, truncation, pairs, stride and overflow, offsets, tensors: the same BatchEncoding
    (or the same error) on both paths."""
    tok = tokenizers(option)
    if batch:
        args = ([first, first[::-1]],) if second is None else ([first, second], [second, first])
    else:
        args = (first,) if second is None else (first, second)
    fast, reference = on_both_paths(lambda: tok(*args, **kwargs))
    assert fast == reference


@SETTINGS
@given(text=texts, option=st.sampled_from(range(len(OPTIONS))))
def test_offsets_do_not_change_the_ids(tokenizers, text, option):
    """On the reference path the ids come from the plain steps and, with offsets asked for, from
    the span-carrying steps (aligned.py): the same ids."""
    tok = tokenizers(option)
    with npbert.using_path("reference"):
        plain = tok(text)["input_ids"]
        with_offsets = tok(text, return_offsets_mapping=True)
    assert with_offsets["input_ids"] == plain
    assert len(with_offsets["offset_mapping"]) == len(plain)


@SETTINGS
@given(vocab=vocabularies(), text=st.lists(st.text("abcdefghij#", max_size=8), max_size=8).map(" ".join),
       lower=st.booleans(), max_chars=st.integers(1, 12))
def test_wordpiece_on_random_vocabularies(tmp_path_factory, vocab, text, lower, max_chars):
    """Small vocabularies, many words without a cover ([UNK]) and words near
    max_input_chars_per_word: WordPiece's greedy search is the same on both paths."""
    path = write_vocab(tmp_path_factory.mktemp("vocab"), vocab)
    tok = BertTokenizer(path, do_lower_case=lower, max_input_chars_per_word=max_chars)
    assert_same_tokens(tok, text)
    assert_same_tokens(tok, text.upper())


def test_the_path_fixture_switches_the_path():
    assert on_both_paths(npbert.get_path) == ["fast", "reference"]


def test_the_equality_test_fails_on_a_broken_fast_step(minilm_dir, monkeypatch):
    """Break the fast path's ASCII shortcut (it forgets to lower-case words with a digit) and
    check that the property test above finds a text where the paths differ."""
    right = aligned.split_plain_ascii

    def forgets_lower_case_next_to_digits(basic, text, never_split):
        tokens = right(basic, text, never_split)
        return [(text[start:start + len(token)] if any(c.isdigit() for c in token) else token, start)
                for token, start in tokens]

    def run_the_property_test():
        # fresh tokenizers: the module's are full of cached words analysed by the right code
        fresh = functools.lru_cache(maxsize=None)(
            lambda index: BertTokenizer.from_pretrained(minilm_dir, **OPTIONS[index]))
        check = given(text=st.text("aB1 ,", max_size=12), option=st.just(0))(
            test_tokens_and_ids_equal_on_both_paths.hypothesis.inner_test)
        settings(max_examples=200, deadline=None, database=None)(check)(tokenizers=fresh)

    run_the_property_test()                               # passes on the right code
    monkeypatch.setattr(aligned, "split_plain_ascii", forgets_lower_case_next_to_digits)
    with pytest.raises(AssertionError):
        run_the_property_test()
