"""add_tokens / add_special_tokens, init_kwargs, unknown keywords, save and reload with every
setting, warnings through logging: against transformers' Python BERT tokenizer where it has them."""
import logging

import pytest

from npbert.tokenization import BertTokenizer

TEXTS = ["newword NewWord axyzzyb <ent> Hello", "NewWord <ent> xyzzy [SEP] x", "covid-19 <e1>covid</e1>", ""]


def _added(tokenizer):
    counts = [tokenizer.add_tokens(["NewWord", "hello", "xyzzy", "covid"]),
              tokenizer.add_special_tokens({"additional_special_tokens": ["<ent>", "<e1>", "</e1>"],
                                            "pad_token": "[PAD]"}),
              tokenizer.add_tokens("xyzzy"), tokenizer.add_tokens(["<s2>"], special_tokens=True)]
    return tokenizer, counts


def test_added_tokens_equal_transformers(minilm_dir, reference_class, tmp_path):
    """Counts, vocabulary, special tokens and decoding as transformers' Python tokenizer; the tokens
    of a text as its Rust tokenizer (and 4.x's Python one): an added token is found in the text
    lower-cased ("NewWord" -> "newword"), which transformers 5's Python tokenizer no longer does."""
    transformers = pytest.importorskip("transformers")
    ours, ours_counts = _added(BertTokenizer.from_pretrained(minilm_dir))
    theirs, their_counts = _added(reference_class.from_pretrained(minilm_dir))
    rust, _ = _added(transformers.BertTokenizer.from_pretrained(minilm_dir))
    assert ours_counts == their_counts == [3, 3, 0, 1]
    assert len(ours) == len(theirs) == 30522 + 7 and ours.vocab_size == theirs.vocab_size == 30522
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.tokenize(TEXTS[0]) != theirs.tokenize(TEXTS[0])      # "NewWord": the case this test is about
    for text in TEXTS:
        assert ours.tokenize(text) == rust.tokenize(text), text
        enc = ours(text, "pair xyzzy")
        assert enc["input_ids"] == rust(text, "pair xyzzy")["input_ids"], text
        for skip in (False, True):
            assert ours.decode(enc["input_ids"], skip_special_tokens=skip) == \
                theirs.decode(enc["input_ids"], skip_special_tokens=skip)
    # saved and reloaded: the same tokenizer (vocab.txt keeps the file's 30522 tokens)
    ours.save_pretrained(tmp_path)
    assert sum(1 for _ in open(tmp_path / "vocab.txt", encoding="utf-8")) == 30522
    again = BertTokenizer.from_pretrained(tmp_path)
    assert again.get_vocab() == ours.get_vocab() and again.all_special_tokens == ours.all_special_tokens
    assert [again.tokenize(t) for t in TEXTS] == [ours.tokenize(t) for t in TEXTS]
    assert again.added_tokens_decoder == ours.added_tokens_decoder
    # ... and by transformers (Python and Rust)
    theirs_again = reference_class.from_pretrained(tmp_path)
    assert theirs_again.get_vocab() == ours.get_vocab()
    assert [theirs_again.tokenize(t) for t in TEXTS[2:]] == [ours.tokenize(t) for t in TEXTS[2:]]   # no "NewWord"
    rust_again = transformers.BertTokenizer.from_pretrained(tmp_path)
    assert [rust_again(t)["input_ids"] for t in TEXTS] == [ours(t)["input_ids"] for t in TEXTS]


def test_added_token_found_in_lower_cased_text(minilm_dir):
    """4.x's Python tokenizer lower-cases the text outside special tokens before it looks for added
    tokens; a character lower-casing to two ("İ") keeps the spans right."""
    tok = BertTokenizer.from_pretrained(minilm_dir)
    tok.add_tokens(["Covid Nineteen"])
    text = "İ COVID NINETEEN, covid nineteen [SEP]"
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    assert enc.tokens() == ["i", "covid nineteen", ",", "covid nineteen", "[SEP]"]
    assert [text[s:e] for s, e in enc["offset_mapping"]] == ["İ", "COVID NINETEEN", ",", "covid nineteen", "[SEP]"]
    cased = BertTokenizer.from_pretrained(minilm_dir, do_lower_case=False)
    cased.add_tokens(["Covid"])
    assert cased.tokenize("COVID Covid")[-1] == "Covid" and "Covid" not in cased.tokenize("COVID")


def test_added_tokens_keep_the_fast_methods_and_offsets(minilm_dir):
    tok, _ = _added(BertTokenizer.from_pretrained(minilm_dir))
    text = "a xyzzy<ent>b"
    enc = tok(text, return_offsets_mapping=True)
    assert enc.tokens() == ["[CLS]", "a", "xyzzy", "<ent>", "b", "[SEP]"]
    assert [text[s:e] for s, e in enc["offset_mapping"]] == ["", "a", "xyzzy", "<ent>", "b", ""]
    assert enc.word_ids() == [None, 0, 1, 2, 3, None]
    stale = BertTokenizer.from_pretrained(minilm_dir)
    old = stale("a xyzzy")
    stale.add_tokens(["xyzzy"])
    with pytest.raises(ValueError, match="no longer matches"):
        old.tokens()


def test_a_model_resized_to_len_tokenizer(minilm_dir):
    import npbert

    tok = BertTokenizer.from_pretrained(minilm_dir)
    tok.add_special_tokens({"additional_special_tokens": ["<ent>"]})
    model = npbert.BertModel.from_pretrained(minilm_dir)
    model.resize_token_embeddings(len(tok))
    ids = tok("the <ent> cat", return_tensors="np")
    assert ids["input_ids"][0, 2] == 30522
    assert model(**ids).last_hidden_state.shape == (1, 5, model.config.hidden_size)


def test_added_token_errors(minilm_dir):
    tok = BertTokenizer.from_pretrained(minilm_dir)
    assert tok.add_tokens([""]) == 0 and tok.add_tokens("") == 0 and len(tok) == 30522   # as transformers
    with pytest.raises(ValueError, match="a token must be a string"):
        tok.add_tokens([3])
    with pytest.raises(ValueError, match=r"\['bos'\] are not special-token names"):
        tok.add_special_tokens({"bos": "<s>"})
    with pytest.raises(ValueError, match="additional_special_tokens must be a list"):
        tok.add_special_tokens({"additional_special_tokens": "<x>"})


def test_init_kwargs_and_unknown_keywords(minilm_dir, reference_class, tmp_path, caplog):
    theirs = reference_class(f"{minilm_dir}/vocab.txt", do_lower_case=False, my_option=3)
    with caplog.at_level(logging.WARNING, logger="npbert"), pytest.warns(UserWarning, match="my_option"):
        ours = BertTokenizer(f"{minilm_dir}/vocab.txt", do_lower_case=False, my_option=3)
    assert "['my_option'] are not options" in caplog.text
    assert ours.init_kwargs["vocab_file"] == f"{minilm_dir}/vocab.txt"
    for key in set(theirs.init_kwargs) - {"backend"}:      # (transformers' own bookkeeping)
        assert str(ours.init_kwargs[key]) == str(theirs.init_kwargs[key]), key
    with pytest.warns(UserWarning, match="my_option"):
        ours.save_pretrained(tmp_path)
        assert BertTokenizer.from_pretrained(tmp_path).init_kwargs["my_option"] == 3


def test_save_and_reload_keep_every_setting(minilm_dir, tmp_path):
    settings = dict(do_lower_case=False, never_split=["Hello"], tokenize_chinese_chars=False, strip_accents=True,
                    do_basic_tokenize=True, model_max_length=77, padding_side="left", truncation_side="left",
                    clean_up_tokenization_spaces=False, model_input_names=["input_ids", "attention_mask"],
                    additional_special_tokens=["[unused1]"])
    ours = BertTokenizer.from_pretrained(minilm_dir, **settings)
    ours.save_pretrained(tmp_path)
    again = BertTokenizer.from_pretrained(tmp_path)
    for key, value in settings.items():
        got = getattr(again, key) if hasattr(again, key) else getattr(again.basic_tokenizer, key)
        got = sorted(got) if isinstance(got, set) else got
        assert got == value, key
    text = "Hello héllo 中文 [unused1] x " * 40
    assert again(text, truncation=True, padding="max_length") == ours(text, truncation=True, padding="max_length")


def test_too_long_warning_goes_to_logging_and_warnings(minilm_dir, caplog):
    tok = BertTokenizer.from_pretrained(minilm_dir)
    with caplog.at_level(logging.WARNING, logger="npbert"), pytest.warns(UserWarning, match=r"\(602 > 512\)"):
        tok("hello " * 600)
    assert caplog.records[0].name.startswith("npbert")


def test_setting_a_special_token_as_tutorials_do(minilm_dir, reference_class):
    ours, theirs = BertTokenizer.from_pretrained(minilm_dir), reference_class.from_pretrained(minilm_dir)
    for tok in (ours, theirs):
        tok.pad_token = "[unused0]"
        tok.cls_token = "[unused1]"
    for args in ((["a", "b c"],), ("x [unused0] y", "[unused1]")):
        assert ours(*args, padding=True)["input_ids"] == theirs(*args, padding=True)["input_ids"], args
        assert ours.tokenize(args[0][0]) == theirs.tokenize(args[0][0])
    ours.pad_token = None
    assert ours.pad_token_id is None
    with pytest.raises(ValueError, match="add_special_tokens"):
        ours.mask_token = "<not in the vocabulary>"
    ours.cls_token = None                 # unset, as transformers allows; [CLS] ... [SEP] then says why not
    assert ours.cls_token is None and ours.cls_token_id is None
    with pytest.raises(ValueError, match="cls_token is None"):
        ours("a b")
    assert ours("a b", add_special_tokens=False)["input_ids"] == theirs("a b", add_special_tokens=False)["input_ids"]
