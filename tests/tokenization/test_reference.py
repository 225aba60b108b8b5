"""npbert's BertTokenizer against transformers' pure-Python BERT tokenizer, on
hand-picked hard strings and every combination of options. Exact equality."""
import itertools
import logging
import warnings

import numpy as np
import pytest

from npbert.tokenization import BertTokenizer

from tokenizer_helpers import assert_encodings_equal

HARD_STRINGS = [
    "Hello, world!",
    "",
    "   \t\n ",
    "\x00\ufffd\x07 \x00",
    "İstanbul İİ iİ",
    "straße STRASSE ß ẞ",
    "ΣΊΣΥΦΟΣ ΟΔΟΣ ΣΑΣ Σ",
    "e\u0301cole cafe\u0301 n\u0303 a\u0316\u0301",
    "\u212b \u2126 \u212a",
    "中文字符测试，这是一个句子。",
    "\U00020000\U0002a700\U0002b740\U0002b820 \u3400\u4dbf",
    "\uf900\uf901\ufa6d \U0002f800\U0002fa1d",
    "日本語のテキストです カタカナ",
    "한국어 텍스트 \u1100\u1161\u11a8 \u1100\u1161",
    "emoji 👍🏽 👨‍👩‍👧 ❤️",
    "soft\u00adhyphen zero\u200bwidth joiner\u200d",
    "line\u2028sep\u2029para",
    "a\x0bb\x0cc\x1cd\x1fe\x85f",
    "tab\tnew\nline\rcr\r\n",
    "nbsp\u00a0here ideographic\u3000space en\u2002quad\u2000",
    "[CLS] [SEP] [PAD] [MASK] [UNK]",
    "x[SEP]y[MASK]z",
    "[sep] [Cls] [UNK",
    "[CL\x00S] [SE\u200bP]",
    "a" * 150,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "124443286539 3.14159 1,000,000",
    "melodically best-selling",
    "don't can't I'm we're they've it's",
    "$100 ^caret `back` ~tilde @at #hash %per &amp *star",
    "¿Qué? ¡Sí! «guillemets» „quotes“ ‘single’",
    "\u01c4 \u01c5 \u01c6 \ufb01 \u2160",
    "Z\u0334\u0321\u032a\u032b\u035a\u0353a\u0336\u0301\u0300lgo",
    "\u0301leading mark \u0308",
    "\u1fef\u1fee\u0385 \u037e \u0387",
    "مرحبا بالعالم नमस्ते สวัสดีครับ Привет",
    "mixed中English文text",
    "a\ud800b \udfff",
    "\U000e0001 tag \U000f0000 private",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
]

BASIC_OPTIONS = list(
    itertools.product([True, False], [None, True, False], [True, False], [None, ["Hello", "[foo]", "hello", "ǅ"]])
)


@pytest.fixture(scope="module")
def pair(minilm_dir, reference_class):
    # use_fast=False: npbert as transformers' Python tokenizer (overflowing tokens in its form;
    # the Rust form is tested against the Rust tokenizer in test_overflow_windows.py)
    return BertTokenizer.from_pretrained(minilm_dir, use_fast=False), reference_class.from_pretrained(minilm_dir)


@pytest.mark.parametrize("do_lower_case, strip_accents, chinese, never_split", BASIC_OPTIONS)
def test_tokenize_all_basic_options(minilm_dir, reference_class, do_lower_case, strip_accents, chinese, never_split):
    options = dict(
        do_lower_case=do_lower_case,
        strip_accents=strip_accents,
        tokenize_chinese_chars=chinese,
        never_split=never_split,
    )
    ours = BertTokenizer.from_pretrained(minilm_dir, **options)
    theirs = reference_class.from_pretrained(minilm_dir, **options)
    for text in HARD_STRINGS:
        assert ours.tokenize(text) == theirs.tokenize(text), repr(text)
        assert ours.basic_tokenizer.tokenize(text) == theirs.basic_tokenizer.tokenize(text), repr(text)
        assert ours.encode(text) == theirs.encode(text), repr(text)


def test_do_basic_tokenize_false(minilm_dir, reference_class):
    ours = BertTokenizer.from_pretrained(minilm_dir, do_basic_tokenize=False)
    theirs = reference_class.from_pretrained(minilm_dir, do_basic_tokenize=False)
    for text in HARD_STRINGS + ["hello world", "hello\u00a0world\x1c!"]:
        assert ours.tokenize(text) == theirs.tokenize(text), repr(text)


def test_decode(pair):
    ours, theirs = pair
    for text in HARD_STRINGS:
        ids = theirs.encode(text)
        for skip, clean in itertools.product([False, True], [None, False, True]):
            kwargs = dict(skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
            assert ours.decode(ids, **kwargs) == theirs.decode(ids, **kwargs)
    batch = [theirs.encode(t) for t in HARD_STRINGS[:5]]
    assert ours.batch_decode(batch) == theirs.batch_decode(batch)
    assert ours.batch_decode(batch, skip_special_tokens=True) == theirs.batch_decode(batch, skip_special_tokens=True)
    assert ours.decode(np.array(batch[0])) == theirs.decode(np.array(batch[0]))
    assert ours.decode(2088) == theirs.decode(2088)
    assert ours.decode([7592, 10**6, -5]) == theirs.decode([7592, 10**6, -5])  # out of range -> [UNK]
    assert ours.convert_ids_to_tokens([101, 7592, 102], skip_special_tokens=True) == theirs.convert_ids_to_tokens(
        [101, 7592, 102], skip_special_tokens=True
    )


def test_special_token_helpers(pair):
    ours, theirs = pair
    a, b = [5, 6, 7], [8, 9]
    assert ours.build_inputs_with_special_tokens(a) == theirs.build_inputs_with_special_tokens(a)
    assert ours.build_inputs_with_special_tokens(a, b) == theirs.build_inputs_with_special_tokens(a, b)
    assert ours.create_token_type_ids_from_sequences(a) == theirs.create_token_type_ids_from_sequences(a)
    assert ours.create_token_type_ids_from_sequences(a, b) == theirs.create_token_type_ids_from_sequences(a, b)
    assert ours.get_special_tokens_mask(a) == theirs.get_special_tokens_mask(a)
    assert ours.get_special_tokens_mask(a, b) == theirs.get_special_tokens_mask(a, b)
    full = [101, 5, 102, 0, 103, 100]
    assert ours.get_special_tokens_mask(full, already_has_special_tokens=True) == theirs.get_special_tokens_mask(
        full, already_has_special_tokens=True
    )
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.special_tokens_map == theirs.special_tokens_map
    for name in ["unk", "sep", "pad", "cls", "mask"]:
        assert getattr(ours, f"{name}_token_id") == getattr(theirs, f"{name}_token_id")
    assert ours.vocab_size == theirs.vocab_size and len(ours) == len(theirs)
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.model_max_length == theirs.model_max_length
    assert ours.max_len_single_sentence == theirs.max_len_single_sentence
    assert ours.max_len_sentences_pair == theirs.max_len_sentences_pair


SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello!",
    "",
    "中文句子很长很长很长，还有更多的字。",
    "melodically best-selling 124443286539 unaffable",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
]
PAIRS = [(a, b) for a in SENTENCES[:4] for b in SENTENCES[2:]]

CALL_OPTIONS = [
    dict(),
    dict(return_token_type_ids=True, return_special_tokens_mask=True, return_length=True),
    dict(return_attention_mask=False),
    dict(add_special_tokens=False, return_special_tokens_mask=True, return_token_type_ids=True),
    dict(padding=True),
    dict(padding="longest", pad_to_multiple_of=8, return_token_type_ids=True, return_special_tokens_mask=True),
    dict(padding="max_length", max_length=24, return_token_type_ids=True),
    dict(padding="max_length"),  # pads to model_max_length (512)
    dict(padding=True, padding_side="left", return_token_type_ids=True, return_special_tokens_mask=True),
    dict(max_length=7),  # max_length alone switches on longest_first truncation
    dict(truncation=True, max_length=6, padding=True, return_token_type_ids=True),
    dict(truncation="longest_first", max_length=9, padding="max_length", return_special_tokens_mask=True),
    dict(truncation="only_first", max_length=12, return_overflowing_tokens=True, stride=2),
    dict(truncation="only_second", max_length=14, return_overflowing_tokens=True, stride=3),
    dict(truncation="longest_first", max_length=8, return_overflowing_tokens=True, stride=1),
    dict(truncation=True),  # to model_max_length
    dict(padding=True, truncation=True, max_length=8, pad_to_multiple_of=4, return_length=True),
    dict(return_tensors="np"),
    dict(return_tensors="np", padding=True, return_token_type_ids=True, return_special_tokens_mask=True),
    dict(return_tensors="np", padding="max_length", max_length=16, truncation=True, return_length=True),
    dict(return_tensors="np", truncation="only_second", max_length=12, return_overflowing_tokens=True),
]


def _truncation_is_on(kwargs):
    truncation = kwargs.get("truncation")
    if truncation is None and not kwargs.get("padding") and kwargs.get("max_length") is not None:
        truncation = True  # max_length alone switches truncation on
    return truncation not in (None, False, "do_not_truncate")


def _overlong(expected, kwargs):
    """transformers returned more than max_length tokens although asked to truncate."""
    ids = expected["input_ids"]
    rows = [ids] if len(ids) == 0 or not isinstance(ids[0], (list, np.ndarray)) else ids
    max_length = kwargs.get("max_length")
    return _truncation_is_on(kwargs) and bool(max_length) and max(len(r) for r in rows) > max_length


def _compare_call(ours, theirs, *args, **kwargs):
    """Same result, or the same exception type; where transformers returns a
    sequence longer than max_length (it cannot truncate as asked), npbert
    raises a ValueError instead."""
    try:
        expected = theirs(*args, **kwargs)
    except AssertionError:
        # transformers fails when only some rows of a batch overflow; npbert
        # fills in [] / 0 for the others: check each row against a single call.
        rows = [
            (item, args[1][i]) if len(args) == 2 else tuple(item) if isinstance(item, tuple) else (item,)
            for i, item in enumerate(args[0])
        ]
        singles = [theirs(*row, **kwargs) for row in rows]
        if any(_overlong(single, kwargs) for single in singles):
            with pytest.raises(ValueError):
                ours(*args, **kwargs)
            return
        got = ours(*args, **kwargs)
        for i, single in enumerate(singles):
            assert got["input_ids"][i][: len(single["input_ids"])] == single["input_ids"]
            assert got["overflowing_tokens"][i] == single.get("overflowing_tokens", [])
        return
    except Exception as error:
        with pytest.raises(type(error)):
            ours(*args, **kwargs)
        return
    if _overlong(expected, kwargs):
        with pytest.raises(ValueError):
            ours(*args, **kwargs)
        return
    if any(getattr(v, "dtype", None) == object for v in expected.values()):
        # The Python tokenizer returns object arrays for a ragged batch with return_tensors="np"
        # (the model then fails on dtype object); npbert raises there, as the Rust tokenizer does.
        with pytest.raises(ValueError, match="padding=True"):
            ours(*args, **kwargs)
        return
    assert_encodings_equal(ours(*args, **kwargs), expected)


@pytest.mark.parametrize("options", CALL_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_call_single_pair_batch(pair, options):
    ours, theirs = pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text in SENTENCES:
            _compare_call(ours, theirs, text, **options)
        for a, b in PAIRS:
            _compare_call(ours, theirs, a, b, **options)
        _compare_call(ours, theirs, SENTENCES, **options)
        _compare_call(ours, theirs, [a for a, _ in PAIRS], [b for _, b in PAIRS], **options)
        _compare_call(ours, theirs, PAIRS, **options)  # a batch of (text, pair) tuples
        if not options.get("return_tensors"):
            encode_options = {k: v for k, v in options.items() if k in ENCODE_ARGS}
            expected = theirs.encode(SENTENCES[0], SENTENCES[4], **encode_options)
            if _overlong({"input_ids": expected}, encode_options):
                with pytest.raises(ValueError):
                    ours.encode(SENTENCES[0], SENTENCES[4], **encode_options)
            else:
                assert ours.encode(SENTENCES[0], SENTENCES[4], **encode_options) == expected


ENCODE_ARGS = ("add_special_tokens", "padding", "truncation", "max_length", "stride", "padding_side")


@pytest.mark.parametrize("side", ["left", "right"])
def test_truncation_and_padding_sides(minilm_dir, reference_class, side):
    ours = BertTokenizer.from_pretrained(minilm_dir, truncation_side=side, padding_side=side, use_fast=False)
    theirs = reference_class.from_pretrained(minilm_dir, truncation_side=side, padding_side=side)
    # (an empty second text truncated from the left: see the test below)
    pairs = [(a, b) for a, b in PAIRS if b or side == "right"]
    for options in CALL_OPTIONS:
        for a, b in pairs:
            _compare_call(ours, theirs, a, b, **options)
        _compare_call(ours, theirs, SENTENCES, **options)


def test_left_truncation_keeps_an_empty_second_text(minilm_dir, reference_class):
    """transformers 5.x turns an empty second text into "no second text" when it
    truncates a pair from the left (dropping its [SEP]); npbert keeps the pair."""
    ours = BertTokenizer.from_pretrained(minilm_dir, truncation_side="left")
    theirs = reference_class.from_pretrained(minilm_dir, truncation_side="left")
    text = "the quick brown fox"
    got = ours(text, "", truncation=True, max_length=5)["input_ids"]
    assert got == [101, 2829, 4419, 102, 102]
    assert theirs(text, "", truncation=True, max_length=5)["input_ids"] in (
        [101, 2829, 4419, 102, 102],  # should transformers fix it
        [101, 2829, 4419, 102],  # transformers 5.23: one [SEP] short
    )


def test_input_ids_as_input(pair):
    ours, theirs = pair
    ids = [7592, 2088, 999]
    _compare_call(ours, theirs, ids)
    _compare_call(ours, theirs, ids, [2023, 2003], truncation=True, max_length=6)
    _compare_call(ours, theirs, [ids, [2023]], padding=True)


def test_longest_first_pair_overflow_is_an_error(pair):
    ours, theirs = pair
    kwargs = dict(truncation="longest_first", max_length=8, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="longest_first"):
        theirs(SENTENCES[0], SENTENCES[4], **kwargs)
    with pytest.raises(ValueError, match="longest_first"):
        ours(SENTENCES[0], SENTENCES[4], **kwargs)


def test_warning_for_too_long_text(pair, minilm_dir, reference_class, caplog):
    text = "word " * 600
    ours = BertTokenizer.from_pretrained(minilm_dir)
    with caplog.at_level(logging.WARNING):
        ours(text)
    assert "Token indices sequence length is longer than the specified maximum sequence length" in caplog.text
    assert "(602 > 512)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ours(text)  # once per tokenizer, as transformers
        ours(text, truncation=True)
    assert caplog.text == ""


def test_warning_max_length_ignored_with_padding_true(pair):
    ours, theirs = pair
    with pytest.warns(UserWarning, match="`max_length` is ignored when `padding`=`True`"):
        theirs("hello", padding=True, max_length=4)
    with pytest.warns(UserWarning, match="`max_length` is ignored when `padding`=`True`"):
        ours("hello", padding=True, max_length=4)


def test_pad_to_multiple_of_must_divide_truncation_length(pair):
    ours, theirs = pair
    kwargs = dict(padding=True, truncation=True, max_length=10, pad_to_multiple_of=4)
    with pytest.raises(ValueError, match="multiple of pad_to_multiple_of"):
        theirs("hello", **kwargs)
    with pytest.raises(ValueError, match="multiple of pad_to_multiple_of"):
        ours("hello", **kwargs)


def test_additional_special_tokens(minilm_dir, reference_class):
    extra = ["[unused1]", "hello", "##ing"]  # all in the vocab
    ours = BertTokenizer.from_pretrained(minilm_dir, additional_special_tokens=extra)
    theirs = reference_class.from_pretrained(minilm_dir, additional_special_tokens=extra)
    assert ours.all_special_tokens == theirs.all_special_tokens
    for text in ["say [unused1] hello world!", "x[unused1]y", "HELLO hello helloworld", "[unused12]", "sing##ing"]:
        assert ours.tokenize(text) == theirs.tokenize(text)
        assert ours.encode(text) == theirs.encode(text)
        ids = ours.encode(text)
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
        assert ours.get_special_tokens_mask(ids, already_has_special_tokens=True) == theirs.get_special_tokens_mask(
            ids, already_has_special_tokens=True)
