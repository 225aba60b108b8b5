"""Tokens the files declare (issue 48): added_tokens_decoder, special_tokens_map.json,
added_tokens.json, tokenizer.json's added_tokens, for ids inside and beyond the vocabulary, against
transformers' Python tokenizer and its Rust one on folders written here; the fields npbert does not
model refused by name; save_pretrained read back the same by npbert and transformers."""
import json
import os

import pytest

from npbert.tokenization import BertTokenizer

from tokenizer_helpers import write_vocab

WORDS = "the cat sat on a mat < > ent e ##nt ##t dog hello world , . ! ? x y z new ##word".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
VOCAB += [f"[unused{i}]" for i in range(len(VOCAB), 47)] + ["<ent>", "<e1>", "[X]", "zz", "##z"]
ENT, E1 = 47, 48                 # "<ent>" and "<e1>": lines of vocab.txt
TEXTS = ["the <ent> cat", "a<ent>b <e1>x [SEP] <new> zz FooBar <brand> hello", "<ENT> <E1> the<e1><ent>", ""]


def entry(content, special=True, **flags):
    """An added_tokens_decoder entry as transformers writes it."""
    return {"content": content, "lstrip": False, "normalized": not special, "rstrip": False, "single_word": False,
            "special": special, **flags}


def folder(tmp_path, name, config=None, special_map=None, added=None):
    directory = tmp_path / name
    directory.mkdir()
    write_vocab(directory, VOCAB)
    for file, content in (("tokenizer_config.json", config), ("special_tokens_map.json", special_map),
                          ("added_tokens.json", added)):
        if content is not None:
            (directory / file).write_text(json.dumps(content))
    return str(directory)


def assert_like_transformers(directory, reference_class, python=True):
    """len, get_vocab, all_special_tokens, tokens, ids (a pair too) and decode as transformers'
    tokenizers read the folder: its Python one (unless `python` is False: it cannot read a
    tokenizer.json-only folder) and its Rust one.  Where the two differ, npbert gives one of them:
    the text "<ENT>" with a special "<ent>" (the Python one's BasicTokenizer keeps the lower-cased
    "<ent>" whole, the Rust one splits it), decode(skip_special_tokens=True) of a declared special
    token not in all_special_tokens (only the Rust one skips it)."""
    transformers = pytest.importorskip("transformers")
    ours = BertTokenizer.from_pretrained(directory)
    theirs = [reference_class.from_pretrained(directory)] if python else []
    theirs.append(transformers.BertTokenizer.from_pretrained(directory))
    for tok in theirs:
        assert ours.all_special_tokens == tok.all_special_tokens
    return assert_same_tokenizer(ours, theirs, skip_too=python)


def assert_same_tokenizer(ours, theirs, skip_too=True):
    """len, get_vocab, tokens, ids and decode equal to those of each tokenizer in `theirs` where
    they agree (see assert_like_transformers)."""
    for tok in theirs:
        assert len(ours) == len(tok) and ours.get_vocab() == tok.get_vocab()

    def check(call, what):
        expected = [call(tok) for tok in theirs]
        if all(value == expected[0] for value in expected):
            assert call(ours) == expected[0], what
        else:
            assert call(ours) in expected, what

    for text in TEXTS:
        check(lambda tok: tok.tokenize(text), text)
        check(lambda tok: tok(text, "x <ent> y")["input_ids"], text)
        ids = ours(text, "x <ent> y")["input_ids"]
        for skip in (False, True) if skip_too else (False,):     # (skip: the Python one's, see above)
            check(lambda tok: tok.decode(ids, skip_special_tokens=skip), (text, skip))
    return ours


def test_a_vocabulary_id_marked_special_is_kept_whole(tmp_path, reference_class):
    """The issue's case: vocab.txt's line 47 "<ent>" marked special; it was split into '<', 'ent', '>'."""
    directory = folder(tmp_path, "special47", {"added_tokens_decoder": {str(ENT): entry("<ent>")}})
    ours = assert_like_transformers(directory, reference_class)
    assert ours.tokenize("the <ent> cat") == ["the", "<ent>", "cat"]
    assert ours("the <ent> cat")["input_ids"] == [2, 5, ENT, 6, 3]
    assert len(ours) == len(VOCAB) and "<ent>" not in ours.all_special_tokens     # declared, not listed
    assert ours.decode([2, 5, ENT, 6, 3], skip_special_tokens=True) == "the <ent> cat"   # the Python one's


def test_declared_tokens_inside_and_beyond_the_vocabulary(tmp_path, reference_class):
    decoder = {str(ENT): entry("<ent>", special=False), str(E1): entry("<e1>"), "52": entry("<new>"),
               "53": entry("brandnew", special=False)}
    ours = assert_like_transformers(folder(tmp_path, "mixed", {"added_tokens_decoder": decoder}), reference_class)
    assert ours.tokenize("<new> brandnew <e1><ent>") == ["<new>", "brandnew", "<e1>", "<ent>"]
    assert len(ours) == len(VOCAB) + 2 and ours.convert_tokens_to_ids(["<new>", "brandnew"]) == [52, 53]


def test_add_tokens_of_a_vocabulary_entry(tmp_path, reference_class):
    """add_tokens of a token vocab.txt has: its id kept, kept whole from then on (transformers' Python
    tokenizer counts it 0 and lists it with special_tokens=True; the Rust one counts it 1)."""
    transformers = pytest.importorskip("transformers")
    directory = folder(tmp_path, "plain", {})
    for special in (False, True):
        ours, theirs = BertTokenizer.from_pretrained(directory), reference_class.from_pretrained(directory)
        rust = transformers.BertTokenizer.from_pretrained(directory)
        assert [tok.add_tokens(["<ent>", "<brand>"], special_tokens=special) for tok in (ours, theirs)] == [1, 1]
        rust.add_tokens(["<ent>", "<brand>"], special_tokens=special)
        assert ours.all_special_tokens == theirs.all_special_tokens
        assert ("<ent>" in ours.all_special_tokens) is special
        assert_same_tokenizer(ours, [theirs, rust])
        assert ours.tokenize("the <ent> cat") == ["the", "<ent>", "cat"]
        ours.save_pretrained(str(tmp_path / f"saved{special}"))
        assert_same_tokenizer(BertTokenizer.from_pretrained(str(tmp_path / f"saved{special}")), [ours, theirs])


def test_add_special_tokens_replacing_additional_ones(tmp_path, reference_class):
    """Replaced additional special tokens are no longer listed, and stay whole (a vocabulary entry too)."""
    directory = folder(tmp_path, "plain", {})
    ours, theirs = BertTokenizer.from_pretrained(directory), reference_class.from_pretrained(directory)
    for tok in (ours, theirs):
        tok.add_special_tokens({"additional_special_tokens": ["<ent>", "<brand>"]})
        tok.add_special_tokens({"additional_special_tokens": ["<e1>"]})
        tok.add_tokens(["zz"])
        tok.add_tokens(["zz", "<s9>"], special_tokens=True)
    assert ours.all_special_tokens == theirs.all_special_tokens == [
        "[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]", "<e1>", "<s9>"]
    assert_same_tokenizer(ours, [theirs])
    assert ours.tokenize("<ent><brand><e1>") == ["<ent>", "<brand>", "<e1>"]


def test_added_tokens_json_inside_the_vocabulary(tmp_path, reference_class):
    assert_like_transformers(folder(tmp_path, "added", {}, added={"<ent>": ENT, "<brand>": 52}), reference_class)


@pytest.mark.parametrize("config, special_map", [
    ({}, {"additional_special_tokens": ["<ent>", "<e1>", "<brand>"]}),
    # beside added_tokens_decoder, transformers does not read special_tokens_map.json at all
    ({"added_tokens_decoder": {str(E1): entry("<e1>")}}, {"additional_special_tokens": ["<ent>"], "pad_token": "zz"}),
    ({"additional_special_tokens": ["<ent>"], "extra_special_tokens": ["<e1>"]}, None),      # extra wins
    ({"additional_special_tokens": ["<ent>"], "extra_special_tokens": {}}, None),
    ({"additional_special_tokens": ["<ent>"], "extra_special_tokens": {"ent_token": "<e1>"}}, None),
])
def test_listed_special_tokens(tmp_path, reference_class, config, special_map):
    assert_like_transformers(folder(tmp_path, "listed", config, special_map), reference_class)


def _tokenizer_json_folder(tmp_path, name, added_tokens):
    """A folder as transformers 5 saves it (tokenizer.json, no vocab.txt), with `added_tokens`
    appended to tokenizer.json's."""
    transformers = pytest.importorskip("transformers")
    source = folder(tmp_path, name + "-source", {})
    directory = str(tmp_path / name)
    transformers.BertTokenizer.from_pretrained(source).save_pretrained(directory)
    path = os.path.join(directory, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["added_tokens"] += added_tokens
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return directory


def test_tokenizer_json_added_tokens(tmp_path, reference_class):
    added = [{"id": ENT, **entry("<ent>")}, {"id": E1, **entry("<e1>", special=False)}, {"id": 52, **entry("<new>")}]
    directory = _tokenizer_json_folder(tmp_path, "json", added)
    assert not os.path.exists(os.path.join(directory, "vocab.txt"))
    ours = assert_like_transformers(directory, reference_class, python=False)
    assert ours.tokenize("a<ent>the<e1><new>") == ["a", "<ent>", "the", "<e1>", "<new>"]
    assert ours.decode([5, ENT, 52, 3], skip_special_tokens=True) == "the <ent> <new>"   # only listed ones skipped
    undeclared = BertTokenizer(os.path.join(tmp_path, "json-source", "vocab.txt"))
    assert ours.tokenize(TEXTS[1]) != undeclared.tokenize(TEXTS[1])          # the declared tokens matter


@pytest.mark.parametrize("saved_by", ["npbert", "transformers"])
def test_save_pretrained_round_trip(tmp_path, reference_class, saved_by):
    """What one writes, npbert and transformers (Python and Rust) read back the same, tokens listed by
    add_tokens(special_tokens=True) and additional_special_tokens included."""
    transformers = pytest.importorskip("transformers")
    decoder = {str(ENT): entry("<ent>"), str(E1): entry("<e1>", special=False), "52": entry("<new>")}
    directory = folder(tmp_path, "declared", {"added_tokens_decoder": decoder})
    cls = BertTokenizer if saved_by == "npbert" else reference_class
    tok = cls.from_pretrained(directory, additional_special_tokens=["zz"])
    tok.add_tokens(["<s2>"], special_tokens=True)
    tok.add_tokens(["brandnew"])
    tok.save_pretrained(str(tmp_path / "saved"))
    again = BertTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert again.all_special_tokens[-2:] == ["zz", "<s2>"]
    # (not "<E1>": transformers 5's Python tokenizer does not find the non-special "<e1>" in the lower-cased text)
    texts = [TEXTS[0], TEXTS[1], TEXTS[3], "<s2> brandnew zz <new> the<e1><ent>"]
    for other in (tok, reference_class.from_pretrained(str(tmp_path / "saved")),
                  transformers.BertTokenizer.from_pretrained(str(tmp_path / "saved"))):
        assert again.get_vocab() == other.get_vocab() and len(again) == len(other) == len(VOCAB) + 3
        for text in texts:
            assert again.tokenize(text) == other.tokenize(text), (type(other), text)
            ids = again(text)["input_ids"]
            assert ids == other(text)["input_ids"], (type(other), text)
            assert again.decode(ids) == other.decode(ids)
    assert again.all_special_tokens == reference_class.from_pretrained(str(tmp_path / "saved")).all_special_tokens


@pytest.mark.one_path
@pytest.mark.parametrize("flag", ["lstrip", "rstrip", "single_word"])
def test_flags_npbert_does_not_model_are_refused_by_file_and_field(tmp_path, flag):
    cases = [
        (folder(tmp_path, "config", {"added_tokens_decoder": {str(ENT): entry("<ent>", **{flag: True})}}),
         r"tokenizer_config.json: 'added_tokens_decoder' entry 47 \('<ent>'\) has '" + flag + "': true"),
        (folder(tmp_path, "named", {"mask_token": entry("[MASK]", **{flag: True})}),
         r"tokenizer_config.json: 'mask_token' \('\[MASK\]'\) has '" + flag + "'"),
        (folder(tmp_path, "map", {}, {"additional_special_tokens": [entry("<ent>", **{flag: True})]}),
         r"special_tokens_map.json: 'additional_special_tokens' \('<ent>'\) has '" + flag + "'"),
    ]
    for directory, message in cases:
        with pytest.raises(ValueError, match=message):
            BertTokenizer.from_pretrained(directory)
    json_dir = tmp_path / "json"
    json_dir.mkdir()
    tokens = {token: index for index, token in enumerate(VOCAB)}
    (json_dir / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "WordPiece", "vocab": tokens, "unk_token": "[UNK]"}, "normalizer": {"type": "BertNormalizer"},
        "pre_tokenizer": {"type": "BertPreTokenizer"}, "added_tokens": [{"id": ENT, **entry("<ent>", **{flag: True})}]}))
    with pytest.raises(ValueError, match=r"tokenizer.json: 'added_tokens' entry 47 \('<ent>'\) has '" + flag):
        BertTokenizer.from_pretrained(str(json_dir))


@pytest.mark.one_path
def test_split_special_tokens_is_refused(tmp_path):
    directory = folder(tmp_path, "split", {"split_special_tokens": True})
    with pytest.raises(ValueError, match=r"tokenizer_config.json: 'split_special_tokens' is true"):
        BertTokenizer.from_pretrained(directory)
    assert BertTokenizer.from_pretrained(folder(tmp_path, "kept", {"split_special_tokens": False})).tokenize(
        "x [SEP]") == ["x", "[SEP]"]


@pytest.mark.one_path
def test_a_declared_id_that_is_another_vocabulary_entry(tmp_path):
    directory = folder(tmp_path, "wrong", {"added_tokens_decoder": {str(ENT): entry("<e1>")}})
    with pytest.raises(ValueError, match=r"gives the token '<e1>' the id 47, which is '<ent>' in the vocabulary"):
        BertTokenizer.from_pretrained(directory)
