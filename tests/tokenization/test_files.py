"""Tokenizer files: saves that are whole (a failure part-way leaves the old files and no
temporary file), loads that stop with a message naming the file and what is wrong, and the
from_pretrained keywords tutorials pass."""
import errno
import json
import os

import pytest

import npbert
from npbert.tokenization import BertTokenizer, load_vocab

from tokenizer_helpers import write_vocab

pytestmark = pytest.mark.one_path          # files: the same on both paths

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", ",", "!"]


@pytest.fixture
def saved(tmp_path):
    """A directory holding a saved tokenizer, and the bytes of its files."""
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB), do_lower_case=False, model_max_length=9)
    directory = tmp_path / "saved"
    tokenizer.save_pretrained(str(directory))
    return directory, {name: (directory / name).read_bytes() for name in os.listdir(directory)}


def _bigger_tokenizer(tmp_path):
    return BertTokenizer(write_vocab(tmp_path / "big", VOCAB + [f"w{i}" for i in range(5000)]), model_max_length=64)


def _fail_fsync(monkeypatch, call, error, check=lambda: None):
    """os.fsync raises `error` on its `call`-th call (after `check()`), and works otherwise."""
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == call:
            check()
            raise error
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _assert_unchanged(directory, before):
    assert sorted(os.listdir(directory)) == sorted(before), "temporary files left behind"
    for name, data in before.items():
        assert (directory / name).read_bytes() == data, f"{name} changed"


# ---------------------------------------------------------------------------
# Whole saves
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("failing_call", [1, 2, 3])
def test_a_full_disk_part_way_leaves_the_old_files(saved, tmp_path, monkeypatch, failing_call):
    """os.fsync fails with ENOSPC on its 1st, 2nd or 3rd call of the save (the vocab's
    temporary file, the config's, and the re-check before the rename)."""
    directory, before = saved
    (tmp_path / "big").mkdir()
    bigger = _bigger_tokenizer(tmp_path)
    _fail_fsync(monkeypatch, failing_call, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(OSError, match=f"Saving the tokenizer into {directory} failed .*No space left.*unchanged") as info:
        bigger.save_pretrained(str(directory))
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    _assert_unchanged(directory, before)
    assert BertTokenizer.from_pretrained(str(directory)).model_max_length == 9     # the old tokenizer loads


@pytest.mark.parametrize("error", [RuntimeError("injected"), KeyboardInterrupt()])
def test_an_exception_part_way_leaves_the_old_files(saved, tmp_path, monkeypatch, error):
    """An exception (or Ctrl-C) after the new vocab was written to its temporary file, while the
    config's is being written."""
    directory, before = saved
    (tmp_path / "big").mkdir()
    bigger = _bigger_tokenizer(tmp_path)
    def mid_save():
        assert any(name.startswith(".vocab.txt.") for name in os.listdir(directory))

    _fail_fsync(monkeypatch, 2, error, check=mid_save)
    with pytest.raises(type(error)):
        bigger.save_pretrained(str(directory))
    monkeypatch.undo()
    _assert_unchanged(directory, before)


def test_a_failing_rename_leaves_the_old_files(saved, tmp_path, monkeypatch):
    directory, before = saved
    (tmp_path / "big").mkdir()
    bigger = _bigger_tokenizer(tmp_path)

    def replace(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="Input/output error"):
        bigger.save_pretrained(str(directory))
    monkeypatch.undo()
    _assert_unchanged(directory, before)


def test_a_save_that_succeeds_replaces_both_files(saved, tmp_path):
    directory, before = saved
    (tmp_path / "big").mkdir()
    _bigger_tokenizer(tmp_path).save_pretrained(str(directory))
    assert sorted(os.listdir(directory)) == sorted(before)
    again = BertTokenizer.from_pretrained(str(directory))
    assert len(again) == len(VOCAB) + 5000 and again.model_max_length == 64


def test_save_vocabulary(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB))
    (tmp_path / "out").mkdir()
    assert tokenizer.save_vocabulary(str(tmp_path / "out")) == (str(tmp_path / "out" / "vocab.txt"),)
    (path,) = tokenizer.save_vocabulary(str(tmp_path / "out"), filename_prefix="x")
    assert path == str(tmp_path / "out" / "x-vocab.txt")
    assert load_vocab(path) == tokenizer.vocab
    assert sorted(os.listdir(tmp_path / "out")) == ["vocab.txt", "x-vocab.txt"]


def test_a_vocab_with_a_repeated_token_saves_with_the_same_ids(tmp_path):
    """transformers writes such a vocabulary with every later id shifted (after a log warning);
    npbert writes the lines it read."""
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB[:6] + ["hello"] + VOCAB[6:]))
    assert tokenizer.vocab["hello"] == 6 and tokenizer.vocab["world"] == 7
    tokenizer.save_pretrained(str(tmp_path / "out"))
    assert load_vocab(str(tmp_path / "out" / "vocab.txt")) == tokenizer.vocab


def test_a_vocab_with_a_gap_is_not_saved(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB))
    tokenizer.vocab = dict(tokenizer.vocab)
    tokenizer.vocab["far"] = 20
    with pytest.raises(ValueError, match="no token with id 10 .* 'far' with id 20"):
        tokenizer.save_pretrained(str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out" / "vocab.txt")


def test_saving_over_a_file_names_it(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB))
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="Saving the tokenizer into .*file failed"):
        tokenizer.save_pretrained(str(tmp_path / "file"))


# ---------------------------------------------------------------------------
# Loads that notice
# ---------------------------------------------------------------------------


def _directory(tmp_path, config=None, vocab=VOCAB):
    write_vocab(tmp_path, vocab)
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize("config, message", [
    ("[1, 2]", r"tokenizer_config.json must hold a JSON object .* it holds a list"),
    ('"uncased"', r"tokenizer_config.json must hold a JSON object .* it holds a string"),
    ("null", r"tokenizer_config.json must hold a JSON object .* it holds null"),
    ('{"do_lower_case": true,\n "model_max_length": }', r"tokenizer_config.json, line 2 column 22: not valid JSON"),
    ("", r"tokenizer_config.json, line 1 column 1: not valid JSON"),
    ({"do_lower_case": "yes"}, r"tokenizer_config.json: 'do_lower_case' must be true or false, got 'yes'"),
    ({"strip_accents": 1}, r"'strip_accents' must be null, true or false, got 1"),
    ({"model_max_length": "512"}, r"'model_max_length' must be a positive whole number, got '512'"),
    ({"model_max_length": -1}, r"'model_max_length' must be a positive whole number, got -1"),
    ({"model_max_length": 2.5}, r"'model_max_length' must be a positive whole number, got 2.5"),
    ({"never_split": "hello"}, r"'never_split' must be null or a list of strings, got 'hello'"),
    ({"never_split": [1]}, r"'never_split' must be null or a list of strings"),
    ({"padding_side": "middle"}, r"'padding_side' must be 'right' or 'left', got 'middle'"),
    ({"unk_token": 5}, r"'unk_token' must be a token \(a string\), got 5"),
    ({"unk_token": None}, r"'unk_token' must be a token \(a string\), got None"),
    ({"cls_token": {"content": 5}}, r"'cls_token' must be a token"),
    ({"model_input_names": "input_ids"}, r"'model_input_names' must be a list of strings"),
    ({"additional_special_tokens": "hello"}, r"'additional_special_tokens' must be a list of tokens"),
    ({"clean_up_tokenization_spaces": "false"}, r"'clean_up_tokenization_spaces' must be true or false"),
    ({"added_tokens_decoder": [1]}, r"'added_tokens_decoder' must be an object"),
    ({"added_tokens_decoder": {"x": {"content": "hello"}}}, r"added token id 'x' is not a number"),
    ({"added_tokens_decoder": {"5": {"content": 7}}}, r"the added token at id 5 must be a string"),
    ({"added_tokens_decoder": {"30": {"content": "new"}}}, r"the added token 'new' has the id 30, but the next free id is 10"),
])
def test_a_bad_tokenizer_config_names_the_file_and_field(tmp_path, config, message):
    with pytest.raises(ValueError, match=message) as info:
        BertTokenizer.from_pretrained(_directory(tmp_path, config))
    assert "tokenizer_config.json" in str(info.value)


def test_a_config_that_is_not_utf8(tmp_path):
    directory = _directory(tmp_path)
    (tmp_path / "tokenizer_config.json").write_bytes(b'{\n"do_lower_case": true,\n"x": "caf\xe9"}')
    with pytest.raises(ValueError, match=r"tokenizer_config.json, line 3: not UTF-8 text \(byte 0xe9"):
        BertTokenizer.from_pretrained(directory)


def test_a_special_tokens_map_that_is_not_an_object(tmp_path):
    directory = _directory(tmp_path, {"do_lower_case": True})
    (tmp_path / "special_tokens_map.json").write_text("[]")
    with pytest.raises(ValueError, match="special_tokens_map.json must hold a JSON object"):
        BertTokenizer.from_pretrained(directory)


def test_good_configs_still_load(tmp_path):
    """What transformers 4.x and 5.x write: token dicts, extra_special_tokens {}, a float
    model_max_length, added_tokens_decoder naming the vocabulary's own ids."""
    config = {"do_lower_case": False, "model_max_length": 1e30, "extra_special_tokens": {},
              "unk_token": {"content": "[UNK]", "lstrip": False}, "never_split": None, "strip_accents": None,
              "added_tokens_decoder": {"1": {"content": "[UNK]", "special": True}}}
    tokenizer = BertTokenizer.from_pretrained(_directory(tmp_path, config))
    assert tokenizer.model_max_length == int(1e30) and tokenizer.do_lower_case is False


@pytest.mark.parametrize("data, line", [
    (b"[PAD]\n[UNK]\ncaf\xe9\n", 3),
    (b"[PAD]\r\n[UNK]\r\n[CLS]\r\n\xff\n", 4),
    (b"\x80", 1),
])
def test_a_vocab_that_is_not_utf8_names_the_file_and_line(tmp_path, data, line):
    (tmp_path / "vocab.txt").write_bytes(data)
    with pytest.raises(ValueError, match=rf"vocab.txt, line {line}: not UTF-8 text"):
        BertTokenizer.from_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match=rf"vocab.txt, line {line}: not UTF-8 text"):
        load_vocab(str(tmp_path / "vocab.txt"))


def test_an_empty_vocab(tmp_path):
    (tmp_path / "vocab.txt").write_text("")
    with pytest.raises(ValueError, match=r"vocab.txt' is empty"):
        BertTokenizer.from_pretrained(str(tmp_path))


@pytest.mark.parametrize("missing", ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
def test_a_vocab_missing_a_special_token_the_options_need(tmp_path, missing):
    directory = _directory(tmp_path, vocab=[t for t in VOCAB if t != missing])
    if missing in ("[PAD]", "[MASK]"):               # options that do without it: None, with a warning
        name = "pad_token" if missing == "[PAD]" else "mask_token"
        with pytest.warns(UserWarning, match=rf"vocab.txt' has no {name}"):
            assert getattr(BertTokenizer.from_pretrained(directory), name) is None
        assert BertTokenizer.from_pretrained(directory, **{name: None}).vocab_size == len(VOCAB) - 1
        return
    with pytest.raises(ValueError, match=rf"vocab.txt' lacks the special token\(s\) \['\{missing}'\]"):
        BertTokenizer.from_pretrained(directory)


def test_bad_constructor_arguments_are_named(tmp_path):
    path = write_vocab(tmp_path, VOCAB)
    with pytest.raises(ValueError, match=r"BertTokenizer: 'never_split' must be null or a list of strings, got 'abc'"):
        BertTokenizer(path, never_split="abc")
    with pytest.raises(ValueError, match=r"'max_input_chars_per_word' must be a positive whole number"):
        BertTokenizer(path, max_input_chars_per_word=0)


# ---------------------------------------------------------------------------
# from_pretrained keywords, hub names
# ---------------------------------------------------------------------------


def test_hub_keywords_are_accepted_offline(tmp_path):
    directory = _directory(tmp_path, {"do_lower_case": False})
    tokenizer = BertTokenizer.from_pretrained(
        directory, cache_dir=str(tmp_path / "cache"), local_files_only=True, revision="main", force_download=True,
        use_fast=True, trust_remote_code=False, from_tf=False, proxies=None, token=None)
    assert tokenizer.do_lower_case is False
    assert not os.path.exists(tmp_path / "cache")


def test_subfolder(tmp_path):
    (tmp_path / "tok").mkdir()
    _directory(tmp_path / "tok", {"model_max_length": 7})
    assert BertTokenizer.from_pretrained(str(tmp_path), subfolder="tok").model_max_length == 7


@pytest.mark.parametrize("name", ["bert-base-uncased", "google-bert/bert-base-chinese"])
def test_a_hub_name_says_npbert_loads_local_directories(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="local directories only") as info:
        BertTokenizer.from_pretrained(name)
    assert f"AutoTokenizer.from_pretrained('{name}').save_pretrained('DIR')" in str(info.value)
    with pytest.raises(ValueError, match="local directories only"):
        npbert.BertTokenizer.from_pretrained(name, cache_dir="/tmp/x", revision="main")


def test_a_file_or_a_missing_path(tmp_path):
    path = write_vocab(tmp_path, VOCAB)
    assert BertTokenizer.from_pretrained(path).get_vocab() == BertTokenizer(path).get_vocab()   # as transformers
    with pytest.raises(ValueError, match=r"'/no/such/dir' is not a directory\.$"):
        BertTokenizer.from_pretrained("/no/such/dir")


def test_a_directory_without_vocab_txt(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match=r"tokenizer.json: npbert reads BERT WordPiece tokenizers .*its model is None"):
        BertTokenizer.from_pretrained(str(tmp_path))
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "spiece.model").write_text("")
    with pytest.raises(ValueError, match=r"Can't find a vocabulary file .* \(it has spiece.model"):
        BertTokenizer.from_pretrained(str(tmp_path))


def test_check_fits(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, VOCAB))
    tokenizer.check_fits(npbert.BertConfig(vocab_size=10))
    tokenizer.check_fits({"vocab_size": 30522})
    with pytest.raises(ValueError, match=r"ids up to 9: '!'\) does not fit the model: its config has vocab_size=8"):
        tokenizer.check_fits(npbert.BertConfig(vocab_size=8))
