"""What transformers' common tokenizer tests ask of a BERT tokenizer, beyond tokens: bos/eos, the
special-token and id setters (None too), additional special tokens given at init, a keyword that
shadows a method, the over-length warning re-armed by `deprecation_warnings = {}`, decode's
`spaces_between_special_tokens`, `prepare_for_model`, `encode` with `is_split_into_words`, AddedToken
objects.  Each against transformers' Python BERT tokenizer (5.x: BertTokenizerLegacy)."""
import logging
import warnings

import pytest

from npbert.tokenization import BertTokenizer


@pytest.fixture()
def both(minilm_dir, reference_class):
    return BertTokenizer.from_pretrained(minilm_dir, use_fast=False), reference_class.from_pretrained(minilm_dir)


def test_special_token_and_id_setters(both):
    ours, theirs = both
    for tok in (ours, theirs):
        assert tok.bos_token is None and tok.eos_token_id is None
    for name in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        for tok in (ours, theirs):
            setattr(tok, name + "_id", None)
        assert getattr(ours, name) is None is getattr(theirs, name) and getattr(ours, name + "_id") is None
        for tok in (ours, theirs):
            setattr(tok, name + "_id", 2023)
        assert getattr(ours, name) == getattr(theirs, name) == "this"
        assert getattr(ours, name + "_id") == getattr(theirs, name + "_id") == 2023
    # (transformers 5 renamed these extra_special_tokens; 4.x's names and behaviour)
    ours.additional_special_tokens_ids = [2003, 2023]
    assert ours.additional_special_tokens == ["is", "this"] and ours.additional_special_tokens_ids == [2003, 2023]
    assert ours.tokenize("this is") == ["this", "is"]
    ours.additional_special_tokens = None
    assert ours.additional_special_tokens is None and ours.all_special_tokens == ["this"]
    with pytest.raises(ValueError, match="not an id of this tokenizer"):
        ours.pad_token_id = 10 ** 6


def test_unset_tokens_say_what_is_missing(both):
    ours, _ = both
    ours.unk_token = None
    assert ours.unk_token_id is None
    with pytest.raises(ValueError, match="unk_token is None"):
        ours("\u2603")                   # not in the vocabulary
    assert ours("the cat")["input_ids"] == [101, 1996, 4937, 102]


def test_tokens_given_at_init_are_added_as_transformers_adds_them(minilm_dir, reference_class):
    options = dict(bos_token="<s>", eos_token="</s>", additional_special_tokens=["<e1>", "[unused3]"])
    ours = BertTokenizer.from_pretrained(minilm_dir, **options)
    theirs = reference_class.from_pretrained(minilm_dir, **options)
    assert len(ours) == len(theirs) == 30522 + 3
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.all_special_tokens == theirs.all_special_tokens
    text = "<s> a <e1> b [unused3] </s>"
    assert ours(text)["input_ids"] == theirs(text)["input_ids"]


def test_a_token_object_is_taken_by_its_content(minilm_dir, reference_class):
    transformers = pytest.importorskip("transformers")
    added = transformers.AddedToken("<new>", lstrip=True, special=True)
    ours = BertTokenizer.from_pretrained(minilm_dir, additional_special_tokens=[added],
                                         mask_token=transformers.AddedToken("[MASK]"))
    theirs = reference_class.from_pretrained(minilm_dir, additional_special_tokens=[added])
    assert ours.additional_special_tokens == ["<new>"] and ours.mask_token == "[MASK]"
    assert ours("x <new> y")["input_ids"] == theirs("x <new> y")["input_ids"]


def test_a_keyword_shadowing_a_method_is_refused(minilm_dir, reference_class):
    for cls in (BertTokenizer, reference_class):
        for key in ("add_special_tokens", "get_vocab"):
            with pytest.raises(AttributeError, match="conflicts with the method"):
                cls.from_pretrained(minilm_dir, **{key: True})


def test_over_length_warning_once_until_rearmed(both, caplog):
    ours, _ = both
    ours.model_max_length = 8
    text = "word " * 20
    with caplog.at_level(logging.WARNING, logger="npbert"), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        ours(text), ours(text)
        assert sum("Token indices sequence length" in r.message for r in caplog.records) == 1
        ours.deprecation_warnings = {}                  # transformers' way to hear it again
        ours([text])
    assert sum("Token indices sequence length" in r.message for r in caplog.records) == 2


def test_decode_spaces_between_added_tokens(both):
    ours, theirs = both
    for tok in (ours, theirs):
        tok.add_tokens(["[abc]", "[def]", "ghi ihg"])
    ids = theirs.encode("[abc][def][abc]ghi ihg[def] the cat", add_special_tokens=False)
    assert ours.encode("[abc][def][abc]ghi ihg[def] the cat", add_special_tokens=False) == ids
    for skip in (True, False):
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    # False: no spaces around added tokens, as transformers 4.57's Python tokenizer prints it (5.x ignores
    # the option and keeps the spaces)
    assert ours.decode(ids, spaces_between_special_tokens=False) == "[abc][def][abc]ghi ihg[def]the cat"


def test_prepare_for_model_and_encode_keywords(both):
    ours, theirs = both
    ids, pair = ours.encode("the cat sat", add_special_tokens=False), ours.encode("on a mat", add_special_tokens=False)
    for kwargs in ({}, dict(max_length=5, truncation=True), dict(padding="max_length", max_length=12),
                   dict(return_special_tokens_mask=True)):
        assert dict(ours.prepare_for_model(ids, pair, **kwargs)) == dict(theirs.prepare_for_model(ids, pair, **kwargs))
    np_one = ours.prepare_for_model(ids, return_tensors="np")
    assert np_one["input_ids"].shape == (len(ids) + 2,)
    assert ours.prepare_for_model(ids, return_tensors="np", prepend_batch_axis=True)["input_ids"].shape == (1, 5)
    words = [["The", "cat"], ["sat", "on"]]
    assert ours.encode(words[0], is_split_into_words=True) == theirs.encode(words[0], is_split_into_words=True)
    batch = [(words[0], words[1]), (words[1], words[0])]
    assert ours.batch_encode_plus(batch, is_split_into_words=True)["input_ids"] == \
        theirs(batch, is_split_into_words=True)["input_ids"]


def test_save_vocabulary_with_0_6s_keyword(minilm_dir, tmp_path):
    """pytorch-pretrained-bert 0.6 wrote `save_vocabulary(vocab_path=dir)` and got the file's path
    back (not transformers' 1-tuple); its tests then reload from that path."""
    tok = BertTokenizer.from_pretrained(minilm_dir)
    path = tok.save_vocabulary(vocab_path=str(tmp_path))
    assert path == str(tmp_path / "vocab.txt")
    assert open(path, encoding="utf-8").read() == open(minilm_dir / "vocab.txt", encoding="utf-8").read()
    assert BertTokenizer.from_pretrained(path).tokenize("UNwant\u00e9d,running") == tok.tokenize("UNwant\u00e9d,running")
    assert tok.save_vocabulary(str(tmp_path)) == (str(tmp_path / "vocab.txt"),)
    with pytest.raises(TypeError, match="not both"):
        tok.save_vocabulary(str(tmp_path), vocab_path=str(tmp_path))


def test_pad_a_renamed_first_input(both):
    """pad() pads model_input_names[0], whatever its name (transformers' test renames it "inputs")."""
    ours, theirs = both
    batch = ours(["This is a input 1", "This is a much longer input which should be padded"])
    expected = theirs.pad(dict(theirs(["This is a input 1", "This is a much longer input which should be padded"])),
                          padding="longest")
    renamed = {("inputs" if k == "input_ids" else k): v for k, v in batch.items()}
    ours.model_input_names = ["inputs"] + ours.model_input_names[1:]
    padded = ours.pad(renamed, padding="longest")
    assert padded["inputs"] == expected["input_ids"] and padded["attention_mask"] == expected["attention_mask"]
    assert ours.model_input_names[0] == "inputs"


def test_words_is_word_ids_under_its_4x_name(minilm_dir):
    enc = BertTokenizer.from_pretrained(minilm_dir)(["Wonderful no inspiration", "a b"], padding=True)
    with pytest.warns(FutureWarning, match="word_ids"):
        assert enc.words(1) == enc.word_ids(1) == [None, 0, 1, None, None]
