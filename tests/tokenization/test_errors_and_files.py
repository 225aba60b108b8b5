"""Clear errors for bad vocabularies and bad input; from_pretrained / save_pretrained."""
import json

import numpy as np
import pytest

from npbert.tokenization import BertTokenizer, load_vocab

from tokenizer_helpers import write_vocab

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", ",", "!"]


@pytest.fixture
def tokenizer(tmp_path):
    return BertTokenizer(write_vocab(tmp_path, VOCAB))


def test_missing_vocab_file(tmp_path):
    with pytest.raises(ValueError, match="Can't find a vocabulary file"):
        BertTokenizer(str(tmp_path / "nope.txt"))


def test_empty_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("")
    with pytest.raises(ValueError, match="empty"):
        BertTokenizer(str(path))


def test_vocab_without_special_tokens(tmp_path):
    """[UNK], [CLS], [SEP] are needed; a missing [MASK] (or [PAD]) makes mask_token None."""
    with pytest.warns(UserWarning, match="no mask_token"), \
            pytest.raises(ValueError, match=r"lacks the special token\(s\) \['\[UNK\]'\]"):
        BertTokenizer(write_vocab(tmp_path, ["[PAD]", "[CLS]", "[SEP]", "hello"]))


def test_vocab_lines_as_transformers_reads_them(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("a\r\nb\rc \nd\u2028e\nd\n".encode("utf-8"))
    # universal newlines end lines at \r\n and \r; U+2028 does not end a line;
    # a trailing space stays; a repeated token keeps its last id
    assert load_vocab(str(path)) == {"a": 0, "b": 1, "c ": 2, "d\u2028e": 3, "d": 4}


@pytest.mark.parametrize("bad", [123, None, 4.5, b"bytes", {"a": 1}])
def test_non_string_input(tokenizer, bad):
    with pytest.raises(ValueError):
        tokenizer(bad)
    with pytest.raises(ValueError):
        tokenizer(["hello", bad])
    if bad is not None:  # text_pair=None means "no second text"
        with pytest.raises(ValueError):
            tokenizer("hello", bad)


def test_tokenize_non_string(tokenizer):
    with pytest.raises(TypeError, match="takes a str"):
        tokenizer.tokenize(["hello"])


def test_max_length_too_small_for_special_tokens(tokenizer):
    with pytest.raises(ValueError, match="cannot hold the 2 special tokens"):
        tokenizer("hello world", truncation=True, max_length=1)
    with pytest.raises(ValueError, match="cannot hold the 3 special tokens"):
        tokenizer("hello", "world", truncation=True, max_length=2)
    assert tokenizer("hello world", truncation=True, max_length=2)["input_ids"] == [2, 3]


def test_truncation_that_cannot_be_done(tokenizer):
    with pytest.raises(ValueError, match="only_second"):
        tokenizer("hello world hello", "world", truncation="only_second", max_length=4)
    with pytest.raises(ValueError, match="only_second"):
        tokenizer("hello world hello", truncation="only_second", max_length=3)
    with pytest.raises(ValueError, match="first sequence has only 1"):
        tokenizer("hello", "world hello world", truncation="only_first", max_length=4)


def test_batch_pair_mismatch(tokenizer):
    with pytest.raises(ValueError, match="same length"):
        tokenizer(["hello", "world"], ["hello"])
    with pytest.raises(ValueError, match="Expected a pair"):
        tokenizer([("hello", "world", "hello")])
    with pytest.raises(ValueError, match="empty batch"):
        tokenizer([])


def test_bad_option_values(tokenizer):
    with pytest.raises(ValueError, match="padding="):
        tokenizer("hello", padding="sideways")
    with pytest.raises(ValueError, match="truncation="):
        tokenizer("hello", truncation="only_third")
    with pytest.raises(ValueError, match="return_tensors"):
        tokenizer("hello", return_tensors="pt")
    with pytest.raises(ValueError, match="padding_side"):
        tokenizer("hello", padding=True, padding_side="middle")
    with pytest.raises(TypeError):
        tokenizer("hello", no_such_option=True)


def test_no_pad_token(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB), pad_token=None)
    with pytest.raises(ValueError, match="padding token"):
        tokenizer(["hello", "hello world"], padding=True)


def test_return_tensors_np_is_int64(tokenizer):
    encoding = tokenizer(["hello", "hello world !"], padding=True, return_tensors="np",
                         return_offsets_mapping=True, return_token_type_ids=True)
    for key in ["input_ids", "attention_mask", "token_type_ids", "offset_mapping"]:
        assert encoding[key].dtype == np.int64
    assert encoding["input_ids"].shape == (2, 5)
    assert encoding["offset_mapping"].shape == (2, 5, 2)
    assert encoding["input_ids"].tolist() == [[2, 5, 3, 0, 0], [2, 5, 6, 9, 3]]
    assert encoding["offset_mapping"][1].tolist() == [[0, 0], [0, 5], [6, 11], [12, 13], [0, 0]]
    assert encoding.input_ids is encoding["input_ids"]


def test_offsets_across_normalisation(tmp_path):
    vocab = VOCAB + ["istanbul", "i", "##̇", "strasse", "straße", "中", "文", "cafe", "ecole"]
    tokenizer = BertTokenizer(write_vocab(tmp_path, vocab))
    text = "İstanbul\x00 straße 中文 Cafe\u0301 e\u0301\u200bcole"
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    assert tokens == ["istanbul", "straße", "中", "文", "cafe", "ecole"]
    assert [text[s:e] for s, e in encoding["offset_mapping"]] == [
        "İstanbul", "straße", "中", "文", "Cafe", "e\u0301\u200bcole"]  # a stripped accent at the end is no one's


def test_from_pretrained_reads_config(tmp_path):
    write_vocab(tmp_path, VOCAB + ["Hello"])
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "do_lower_case": False, "model_max_length": 7, "padding_side": "left",
        "unk_token": {"content": "[UNK]", "lstrip": False, "__type": "AddedToken"},
        "tokenizer_class": "BertTokenizer", "name_or_path": "x", "some_unknown_key": 1,
    }))
    with pytest.warns(UserWarning, match=r"\['some_unknown_key'\] are not options"):  # kept, as transformers
        tokenizer = BertTokenizer.from_pretrained(str(tmp_path))
    assert tokenizer.init_kwargs["some_unknown_key"] == 1 and "name_or_path" not in tokenizer.init_kwargs
    assert tokenizer.do_lower_case is False and tokenizer.model_max_length == 7
    assert tokenizer.tokenize("Hello hello") == ["Hello", "hello"]
    assert tokenizer(["Hello", "Hello hello"], padding=True)["input_ids"] == [[0, 2, 10, 3], [2, 10, 5, 3]]
    assert BertTokenizer.from_pretrained(str(tmp_path), do_lower_case=True).tokenize("Hello") == ["hello"]


def test_from_pretrained_needs_a_directory_with_vocab(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        BertTokenizer.from_pretrained(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="Can't find a vocabulary file"):
        BertTokenizer.from_pretrained(str(tmp_path))


def test_save_and_reload(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB), do_lower_case=False, never_split=["Hello"],
                              model_max_length=9, strip_accents=True)
    saved = tmp_path / "saved"
    tokenizer.save_pretrained(str(saved))
    assert (saved / "vocab.txt").read_text().split("\n")[:-1] == VOCAB
    again = BertTokenizer.from_pretrained(str(saved))
    assert again.do_lower_case is False and again.model_max_length == 9
    assert again.basic_tokenizer.never_split == {"Hello"} and again.basic_tokenizer.strip_accents is True
    text = "Hello héllo, worlds!"
    assert again(text) == tokenizer(text)


def test_transformers_reads_what_we_save_and_we_read_what_it_saves(tmp_path, minilm_dir, reference_class):
    ours = BertTokenizer.from_pretrained(minilm_dir, do_lower_case=False, model_max_length=128)
    ours.save_pretrained(str(tmp_path / "ours"))
    theirs = reference_class.from_pretrained(str(tmp_path / "ours"))
    text = "Hello World, naïve 中文 [SEP] text " * 30
    kwargs = dict(truncation=True, return_token_type_ids=True)
    assert dict(theirs(text, **kwargs)) == dict(ours(text, **kwargs))
    assert theirs.model_max_length == 128 and theirs.do_lower_case is False

    theirs.save_pretrained(str(tmp_path / "theirs"))
    again = BertTokenizer.from_pretrained(str(tmp_path / "theirs"))
    assert dict(again(text, **kwargs)) == dict(theirs(text, **kwargs))
