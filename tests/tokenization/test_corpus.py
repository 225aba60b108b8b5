"""Exact equality with transformers' Python tokenizer on a real corpus (a few MB
of English, many-language and Chinese text from this machine, see
tokenization_corpus.py), with the real MiniLM vocabulary."""
import pytest

import npbert
from npbert.tokenization import BertTokenizer

from tokenizer_helpers import assert_encodings_equal

BATCH = 256


def _for_this_path(lines):
    """All lines on the fast path; every 4th on the reference path, whose plain steps run at the
    speed of transformers' Python tokenizer (tests/tokenization/test_two_paths.py checks the two
    paths equal on random text)."""
    return lines if npbert.get_path() == "fast" else lines[::4]


def _batches(lines, size=BATCH):
    for i in range(0, len(lines), size):
        yield lines[i : i + size]


@pytest.mark.one_path
def test_corpus_is_several_mb_of_english_and_chinese(corpus):
    text = "\n".join(corpus)
    assert len(text.encode("utf-8")) > 2_000_000 or len(text) > 1_000_000
    chinese = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    assert chinese > 50_000
    assert text.count(" the ") > 1_000


def test_whole_corpus_default_options(minilm_dir, reference_class, corpus):
    ours = BertTokenizer.from_pretrained(minilm_dir)
    theirs = reference_class.from_pretrained(minilm_dir)
    kwargs = dict(return_token_type_ids=True, return_special_tokens_mask=True, return_length=True)
    all_ids = []
    for lines in _batches(_for_this_path(corpus)):
        expected = theirs(lines, **kwargs)
        assert_encodings_equal(ours(lines, **kwargs), expected)
        all_ids += expected["input_ids"]
    # decode every line back
    assert ours.batch_decode(all_ids) == theirs.batch_decode(all_ids)
    assert ours.batch_decode(all_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) == \
        theirs.batch_decode(all_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


@pytest.mark.parametrize(
    "options",
    [
        dict(do_lower_case=False),
        dict(do_lower_case=True, strip_accents=False),
        dict(do_lower_case=False, strip_accents=True, tokenize_chinese_chars=False),
        dict(never_split=["hello", "Python", "(self):"]),
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_corpus_sample_other_options(minilm_dir, reference_class, corpus, options):
    ours = BertTokenizer.from_pretrained(minilm_dir, **options)
    theirs = reference_class.from_pretrained(minilm_dir, **options)
    sample = _for_this_path(corpus[::16])  # every 16th line: all sources, a sixteenth of the size
    for lines in _batches(sample):
        assert ours(lines)["input_ids"] == theirs(lines)["input_ids"]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(padding=True, truncation=True, max_length=32, return_token_type_ids=True, return_tensors="np"),
        dict(padding="max_length", truncation="only_second", max_length=48, return_overflowing_tokens=True,
             stride=4, return_special_tokens_mask=True),
        dict(truncation="only_first", max_length=40, return_overflowing_tokens=True, stride=2),
        dict(padding="longest", pad_to_multiple_of=16, padding_side="left", return_special_tokens_mask=True,
             return_token_type_ids=True),
        dict(truncation=True, max_length=20, return_tensors="np", padding=True),
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_corpus_pairs_truncation_padding(minilm_dir, reference_class, corpus, kwargs):
    ours = BertTokenizer.from_pretrained(minilm_dir, use_fast=False)     # the Python tokenizer's overflow form
    theirs = reference_class.from_pretrained(minilm_dir)
    sample = _for_this_path(corpus[::40])
    firsts, seconds = sample[0::2], sample[1::2]
    n = min(len(firsts), len(seconds))
    firsts, seconds = firsts[:n], seconds[:n]
    # transformers' Python tokenizer needs every row of a batch to overflow, or
    # none (else it fails), and cannot truncate a sequence shorter than what
    # must go (it returns it too long, npbert raises): pick rows it handles,
    # one at a time, and compare batches of those.
    for lo in range(0, n, 64):
        rows = []
        for a, b in zip(firsts[lo : lo + 64], seconds[lo : lo + 64]):
            single = theirs(a, b, **{k: v for k, v in kwargs.items() if k != "return_tensors"})
            if kwargs.get("max_length") and len(single["input_ids"]) > kwargs["max_length"]:
                with pytest.raises(ValueError):
                    ours(a, b, **kwargs)
                continue
            rows.append((a, b, "overflowing_tokens" in single))
        for overflow in (True, False):
            group = [(a, b) for a, b, o in rows if o == overflow]
            if group:
                args = ([a for a, _ in group], [b for _, b in group])
                assert_encodings_equal(ours(*args, **kwargs), theirs(*args, **kwargs))


def test_corpus_offsets_equal_the_rust_tokenizers(minilm_dir, corpus):
    """transformers' Rust tokenizer computes offsets; ours come from the pure
    Python pass. Where the two give the same ids (the Rust one has no NFC step
    and its own Unicode tables, so not always), the offsets are the same."""
    transformers = pytest.importorskip("transformers")
    ours = BertTokenizer.from_pretrained(minilm_dir)
    rust = transformers.BertTokenizer.from_pretrained(minilm_dir)
    assert rust.is_fast
    lines = _for_this_path(corpus[::2])
    same_ids = 0
    for batch in _batches(lines, 1024):
        a = ours(batch, return_offsets_mapping=True)
        b = rust(batch, return_offsets_mapping=True)
        for ids_a, ids_b, offsets_a, offsets_b in zip(a["input_ids"], b["input_ids"], a["offset_mapping"],
                                                      b["offset_mapping"]):
            if ids_a == ids_b:
                same_ids += 1
                assert offsets_a == [tuple(o) for o in offsets_b]
    assert same_ids >= 0.99 * len(lines)
