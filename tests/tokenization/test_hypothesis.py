"""Property tests on arbitrary Unicode: every option combination gives exactly
transformers' tokens; offsets are ordered, inside the text, and the text under
each span normalises to its token."""
import functools
import itertools
import warnings

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from npbert.tokenization import BasicTokenizer, BertTokenizer  # noqa: E402

from npbert.testing import texts as tokenizer_texts  # noqa: E402

import tokenizer_helpers  # noqa: E402

# npbert.testing.texts() (CJK and its range ends, accents, combining marks, control and zero-width
# characters, whitespace runs), plus what only these option combinations need: words around
# max_input_chars_per_word, and the never_split words and special-token spellings.
texts = st.one_of(
    tokenizer_texts(),
    st.text(st.sampled_from("ab#-"), min_size=90, max_size=140),  # around max_input_chars_per_word
    st.lists(st.sampled_from(["hello", "Hello", "HELLO", "hello,", "[foo]", "ǅ", "unaffable", " ", "İ", "e\u0301",
                              "[SEP]", "[CLS]", "[UNK]", "[sep]", "##"]),
             max_size=12).map("".join),
)

NEVER_SPLIT = ["Hello", "[foo]", "hello", "ǅ"]
OPTIONS = [
    dict(do_lower_case=lower, strip_accents=strip, tokenize_chinese_chars=chinese, never_split=never)
    for lower, strip, chinese, never in itertools.product([True, False], [None, True, False], [True, False],
                                                           [None, NEVER_SPLIT])
]
OPTIONS += [dict(do_basic_tokenize=False), dict(do_basic_tokenize=False, never_split=NEVER_SPLIT)]
OPTION_IDS = list(range(len(OPTIONS)))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tokenizers(minilm_dir, reference_class):
    @functools.lru_cache(maxsize=None)
    def make(index):
        options = OPTIONS[index]
        return (
            # use_fast=False: overflowing tokens in the Python tokenizer's form, as the reference
            BertTokenizer.from_pretrained(minilm_dir, use_fast=False, **options),
            reference_class.from_pretrained(minilm_dir, **options),
        )

    return make


@SETTINGS
@given(text=texts, option=st.sampled_from(OPTION_IDS))
def test_tokens_equal_reference(tokenizers, text, option):
    ours, theirs = tokenizers(option)
    assert ours.tokenize(text) == theirs.tokenize(text)
    if ours.do_basic_tokenize:
        assert ours.basic_tokenizer.tokenize(text) == theirs.basic_tokenizer.tokenize(text)


@SETTINGS
@given(first=texts, second=texts, option=st.sampled_from(OPTION_IDS), max_length=st.integers(3, 20))
def test_call_equals_reference(tokenizers, first, second, option, max_length):
    ours, theirs = tokenizers(option)
    kwargs = dict(return_token_type_ids=True, return_special_tokens_mask=True)
    assert dict(ours(first, second, **kwargs)) == dict(theirs(first, second, **kwargs))
    kwargs.update(truncation="longest_first", max_length=max_length, padding="max_length")
    assert dict(ours([first, second], **kwargs)) == dict(theirs([first, second], **kwargs))
    ids = ours.encode(first)
    assert ours.decode(ids) == theirs.decode(ids)
    assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)


def _fold_final_sigma(text):
    # lower() picks σ or ς from the context of the whole word; a piece of the
    # word seen alone may get the other one.
    return text.replace("ς", "σ")


@SETTINGS
@given(text=texts, option=st.sampled_from(OPTION_IDS))
def test_offsets_are_spans_of_the_tokens(tokenizers, text, option):
    ours, _ = tokenizers(option)
    tokens = ours.tokenize(text)
    encoding = ours(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoding["offset_mapping"]
    assert encoding["input_ids"] == ours.convert_tokens_to_ids(tokens)
    assert len(offsets) == len(tokens)
    for (s, e) in offsets:
        assert 0 <= s < e <= len(text)
    assert [s for s, _ in offsets] == sorted(s for s, _ in offsets)  # starts non-decreasing
    assert [e for _, e in offsets] == sorted(e for _, e in offsets)  # ends non-decreasing

    specials = set(ours.all_special_tokens)
    # A piece of a word is normalised as its word was: with the user's
    # never_split if the word was in it (then the word is one token, kept as
    # it is), else without (a piece of a word may itself be in never_split).
    basic = ours.basic_tokenizer
    normalisers = [basic, BasicTokenizer(basic.do_lower_case, None, basic.tokenize_chinese_chars, basic.strip_accents)]
    for i, (token, (s, e)) in enumerate(zip(tokens, offsets)):
        overlaps = (i > 0 and offsets[i - 1][1] > s) or (i + 1 < len(offsets) and offsets[i + 1][0] < e)
        if overlaps or token == ours.unk_token:
            continue  # pieces of one character (e.g. "İ" -> "i" "##\u0307"), or a whole unknown word
        under = text[s:e]
        if token in specials and under == token:
            continue
        # "##x" is a continuation piece "x", or, without basic tokenization, the first piece of a
        # word that itself starts with "##" (the word "##aaa" -> "##aa", "##a")
        pieces = {token[2:], token} if token.startswith("##") else {token}
        normalised = ["".join(n.tokenize(under, never_split=specials)) for n in normalisers]
        assert any(_fold_final_sigma(p) in [_fold_final_sigma(n) for n in normalised] for p in pieces), (token, under)


@SETTINGS
@given(first=texts, second=texts, max_length=st.integers(3, 20))
def test_offsets_follow_truncation_and_padding(tokenizers, first, second, max_length):
    ours, _ = tokenizers(0)
    single = ours(first, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    for kwargs in [dict(), dict(truncation="only_second", max_length=max_length, padding="max_length"),
                   dict(padding="max_length", max_length=max_length, padding_side="left")]:
        try:
            encoding = ours(first, second, return_offsets_mapping=True, return_special_tokens_mask=True, **kwargs)
        except ValueError:
            continue  # the first text alone is longer than max_length
        offsets, mask = encoding["offset_mapping"], encoding["special_tokens_mask"]
        assert len(offsets) == len(encoding["input_ids"])
        assert all(offsets[i] == (0, 0) for i in range(len(mask)) if mask[i] == 1)  # [CLS] [SEP] [PAD]
        real = [o for o, m in zip(offsets, mask) if m == 0]
        assert real[: len(single)] == single  # the first text comes first, never truncated here


call_options = tokenizer_helpers.call_options(offsets=False)


@SETTINGS
@given(first=texts, second=st.none() | texts, batch=st.booleans(), kwargs=call_options)
def test_any_call_options_equal_reference(tokenizers, first, second, batch, kwargs):
    """Any mix of __call__ options: the same encoding as transformers, or the
    same exception type (or npbert's ValueError where transformers returns a
    sequence longer than max_length)."""
    from test_reference import _compare_call

    ours, theirs = tokenizers(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if batch:
            if second is None:
                _compare_call(ours, theirs, [first, first[::-1]], **kwargs)
            else:
                _compare_call(ours, theirs, [first, second], [second, first], **kwargs)
        elif second is None:
            _compare_call(ours, theirs, first, **kwargs)
        else:
            _compare_call(ours, theirs, first, second, **kwargs)


@SETTINGS
@given(ids=st.lists(st.one_of(st.integers(0, 30521), st.sampled_from([0, 100, 101, 102, 103, 1010, 1012, 1005])),
                    max_size=30),
       skip=st.booleans(), clean=st.sampled_from([None, False, True]))
def test_decode_equals_reference(tokenizers, ids, skip, clean):
    ours, theirs = tokenizers(0)
    kwargs = dict(skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
    assert ours.decode(ids, **kwargs) == theirs.decode(ids, **kwargs)
    assert ours.convert_ids_to_tokens(ids, skip_special_tokens=skip) == theirs.convert_ids_to_tokens(
        ids, skip_special_tokens=skip)
