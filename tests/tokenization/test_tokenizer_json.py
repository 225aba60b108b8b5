"""Loading a tokenizer saved by transformers 5 (tokenizer.json, no vocab.txt), a vocab.txt path,
vocabularies without [PAD]/[MASK], and Google's free vocabulary functions."""
import json
import logging
import os
import shutil

import pytest

from npbert.tokenization import (BertTokenizer, WordpieceTokenizer, convert_ids_to_tokens, convert_tokens_to_ids,
                                 load_vocab)

from test_reference import HARD_STRINGS
from tokenizer_helpers import write_vocab

pytestmark = pytest.mark.one_path


@pytest.fixture(scope="module")
def saved_by_transformers(minilm_dir, tmp_path_factory):
    """The MiniLM tokenizer as transformers 5 saves it: tokenizer.json + tokenizer_config.json."""
    transformers = pytest.importorskip("transformers")
    directory = str(tmp_path_factory.mktemp("saved"))
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(directory)
    if os.path.exists(os.path.join(directory, "vocab.txt")):
        pytest.skip("this transformers writes vocab.txt")
    return directory


def test_tokenizer_json_loads_what_transformers_loads(saved_by_transformers, minilm_dir):
    transformers = pytest.importorskip("transformers")
    ours = BertTokenizer.from_pretrained(saved_by_transformers)
    theirs = transformers.AutoTokenizer.from_pretrained(saved_by_transformers)
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.special_tokens_map == theirs.special_tokens_map
    assert ours.model_max_length == theirs.model_max_length == 512
    normalizer = json.loads(theirs.backend_tokenizer.normalizer.__getstate__())
    assert ours.do_lower_case == normalizer["lowercase"] and ours.basic_tokenizer.strip_accents == normalizer[
        "strip_accents"] and ours.basic_tokenizer.tokenize_chinese_chars == normalizer["handle_chinese_chars"]
    # the same tokenizer as the one read from vocab.txt, which equals transformers' Python one
    from_vocab = BertTokenizer.from_pretrained(minilm_dir)
    for text in HARD_STRINGS:
        assert ours(text, "a pair") == from_vocab(text, "a pair"), repr(text)
    for text in ["Hello, world!", "Héllo İstanbul 中国人", "melodically best-selling [SEP] x", "a" * 120]:
        assert ours(text, "two")["input_ids"] == theirs(text, "two")["input_ids"], text


def test_tokenizer_config_and_keywords_override_tokenizer_json(saved_by_transformers, tmp_path):
    """transformers 5 applies tokenizer_config.json's do_lower_case over the normalizer's."""
    transformers = pytest.importorskip("transformers")
    directory = str(tmp_path / "cased")
    shutil.copytree(saved_by_transformers, directory)
    config_file = os.path.join(directory, "tokenizer_config.json")
    with open(config_file) as f:
        config = json.load(f)
    config["do_lower_case"] = False
    with open(config_file, "w") as f:
        json.dump(config, f)
    theirs = transformers.AutoTokenizer.from_pretrained(directory)
    assert BertTokenizer.from_pretrained(directory).tokenize("Hello World") == theirs.tokenize("Hello World")
    assert BertTokenizer.from_pretrained(saved_by_transformers, do_lower_case=False).tokenize("Hello") == ["[UNK]"]


def test_save_pretrained_still_writes_vocab_txt(saved_by_transformers, tmp_path):
    ours = BertTokenizer.from_pretrained(saved_by_transformers)
    ours.save_pretrained(tmp_path)
    assert load_vocab(tmp_path / "vocab.txt") == ours.get_vocab()
    assert BertTokenizer.from_pretrained(tmp_path)("Hello there") == ours("Hello there")


def _write_json(directory, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(data, f)
    return str(directory)


def test_other_tokenizer_json_files_are_refused(saved_by_transformers, tmp_path):
    with open(os.path.join(saved_by_transformers, "tokenizer.json")) as f:
        good = json.load(f)
    cases = {
        "its model is 'BPE'": {**good, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}},
        "its normalizer is 'Sequence'": {**good, "normalizer": {"type": "Sequence", "normalizers": []}},
        "its pre_tokenizer is 'ByteLevel'": {**good, "pre_tokenizer": {"type": "ByteLevel"}},
        "continue with '@@'": {**good, "model": {**good["model"], "continuing_subword_prefix": "@@"}},
        "clean_text=false": {**good, "normalizer": {**good["normalizer"], "clean_text": False}},
        "no token with id 1": {**good, "model": {**good["model"], "vocab": {"[UNK]": 0, "[CLS]": 2}}},
    }
    for i, (message, data) in enumerate(cases.items()):
        with pytest.raises(ValueError, match=message.replace("[", r"\[")):
            BertTokenizer.from_pretrained(_write_json(tmp_path / str(i), data))
    with pytest.raises(ValueError, match="'lowercase'|do_lower_case"):
        BertTokenizer.from_pretrained(_write_json(tmp_path / "bad", {**good, "normalizer": {
            **good["normalizer"], "lowercase": "yes"}}))


def test_from_pretrained_of_a_vocab_file_path(minilm_dir, reference_class):
    path = os.path.join(minilm_dir, "vocab.txt")
    ours, theirs = BertTokenizer.from_pretrained(path), reference_class.from_pretrained(path)
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours("Hello, world!")["input_ids"] == theirs("Hello, world!")["input_ids"]


GOOGLE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


def test_a_vocabulary_without_pad_and_mask_loads(tmp_path, caplog):
    """google-research/bert's test vocabulary: pad_token and mask_token become None, with a warning
    (transformers appends them as ids 11 and 12, beyond the vocabulary and the model)."""
    path = write_vocab(str(tmp_path), GOOGLE_VOCAB)
    with caplog.at_level(logging.WARNING, logger="npbert"), pytest.warns(UserWarning, match="no pad_token"):
        tok = BertTokenizer(path)
    assert "no mask_token '[MASK]'" in caplog.text
    assert tok.pad_token is None and tok.pad_token_id is None and tok.mask_token is None and len(tok) == 11
    tokens = tok.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tok("unwanted running")["input_ids"] == [1, 7, 4, 5, 8, 9, 2]
    with pytest.raises(ValueError, match="padding token"):
        tok(["un", "unwanted"], padding=True)
    write_vocab(str(tmp_path), GOOGLE_VOCAB[1:])
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) \['\[UNK\]'\]"):
        BertTokenizer(path)


def test_googles_free_functions(tmp_path):
    vocab = load_vocab(write_vocab(str(tmp_path), GOOGLE_VOCAB))
    inv_vocab = {v: k for k, v in vocab.items()}
    assert convert_tokens_to_ids(vocab, ["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]
    assert convert_ids_to_tokens(inv_vocab, [7, 4, 5]) == ["un", "##want", "##ed"]
    assert WordpieceTokenizer(vocab=vocab).tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
