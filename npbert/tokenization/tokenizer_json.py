"""`tokenizer.json` (the file of Hugging Face's `tokenizers` library) -> a BERT vocabulary and options.

transformers 5's `save_pretrained` writes `tokenizer.json` and `tokenizer_config.json`, no
`vocab.txt`.  For a BERT WordPiece tokenizer, tokenizer.json holds everything vocab.txt and the
options hold:

    "model":          {"type": "WordPiece", "vocab": {token: id}, "unk_token": "[UNK]",
                       "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}
    "normalizer":     {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true}
    "pre_tokenizer":  {"type": "BertPreTokenizer"}
    "post_processor": [CLS] A [SEP] (B [SEP]): TemplateProcessing or BertProcessing
    "added_tokens":   [{"id": 100, "content": "[UNK]", "special": true, "normalized": false, ...}, ...]

`read_tokenizer_json(path)` checks that it is exactly that (anything else, a BPE or Unigram model,
another normalizer or pre-tokenizer, is refused with the part that differs) and returns the
vocabulary's tokens in id order, the options as BertTokenizer's keywords, and the added tokens.
Its "truncation" and "padding" settings are not read (transformers 5 does not apply them either:
those come from the call's arguments), nor its post-processor's pair template nor its "decoder"
(transformers 5's BertTokenizer builds both from its special tokens).  An added token with
lstrip, rstrip or single_word true is refused (declared.py).  Nothing in the file is executed.
"""
from npbert.tokenization.declared import refuse_unmodelled_flags
from npbert.tokenization.jsonfile import read_json_object

_NORMALIZER_OPTIONS = {"lowercase": "do_lower_case", "handle_chinese_chars": "tokenize_chinese_chars",
                       "strip_accents": "strip_accents"}


def _refuse(path, what):
    raise ValueError(f"{path}: npbert reads BERT WordPiece tokenizers (a WordPiece model with '##' pieces, "
                     f"the BertNormalizer and the BertPreTokenizer); {what}")


def _kind(value):
    return value.get("type") if isinstance(value, dict) else value


def read_tokenizer_json(path):
    """tokenizer.json -> (tokens in id order, options for BertTokenizer, added tokens
    [{"id", "content", "special", "normalized", ...}])."""
    data = read_json_object(path)
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type", "WordPiece" if "vocab" in (model or {}) else None) != "WordPiece":
        _refuse(path, f"its model is {_kind(model)!r}")
    if model.get("continuing_subword_prefix", "##") != "##":
        _refuse(path, f"its pieces continue with {model['continuing_subword_prefix']!r}, not '##'")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        _refuse(path, "its model has no vocabulary {token: id}")
    tokens = tokens_in_id_order(vocab, path)

    normalizer = data.get("normalizer")
    if _kind(normalizer) != "BertNormalizer":
        _refuse(path, f"its normalizer is {_kind(normalizer)!r}")
    if normalizer.get("clean_text", True) is not True:
        _refuse(path, "its BertNormalizer has clean_text=false (BERT always cleans the text)")
    options = {}
    for key, name in _NORMALIZER_OPTIONS.items():
        if key in normalizer:
            options[name] = normalizer[key]
    if _kind(data.get("pre_tokenizer")) != "BertPreTokenizer":
        _refuse(path, f"its pre_tokenizer is {_kind(data.get('pre_tokenizer'))!r}")
    unk = model.get("unk_token", "[UNK]")
    options["unk_token"] = unk
    if "max_input_chars_per_word" in model:
        options["max_input_chars_per_word"] = model["max_input_chars_per_word"]
    cls_sep = _cls_and_sep(path, data.get("post_processor"))
    if cls_sep is not None:
        options["cls_token"], options["sep_token"] = cls_sep
    return tokens, options, _added_tokens(path, data.get("added_tokens", []))


def tokens_in_id_order(vocab, where):
    """{token: id} -> [token of id 0, token of id 1, ...]; the ids must be 0, 1, ..., n - 1."""
    by_id = {}
    for token, index in vocab.items():
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"{where}: the vocabulary gives the token {token!r} the id {index!r}; ids are "
                             "whole numbers from 0")
        if index in by_id:
            raise ValueError(f"{where}: the vocabulary gives the id {index} to both {by_id[index]!r} and {token!r}")
        by_id[index] = token
    missing = next((i for i in range(len(by_id)) if i not in by_id), None)
    if missing is not None:
        raise ValueError(f"{where}: the vocabulary has no token with id {missing} (its ids must be 0, 1, 2, ... "
                         "without gaps, one line each of a vocab.txt)")
    return [by_id[i] for i in range(len(by_id))]


def _cls_and_sep(path, post):
    """[CLS] and [SEP] of the post-processor, or None if there is none."""
    if post is None:
        return None
    kind = _kind(post)
    if kind == "BertProcessing":
        return post["cls"][0], post["sep"][0]
    if kind != "TemplateProcessing":
        _refuse(path, f"its post_processor is {kind!r}")
    single = post.get("single", [])
    shape = [next(iter(piece)) for piece in single]
    if shape != ["SpecialToken", "Sequence", "SpecialToken"]:
        _refuse(path, f"its post_processor puts {shape} around one text, not [CLS] A [SEP]")
    return single[0]["SpecialToken"]["id"], single[2]["SpecialToken"]["id"]


def _added_tokens(path, added):
    if not isinstance(added, list):
        raise ValueError(f"{path}: 'added_tokens' must be a list of {{\"id\", \"content\", ...}}")
    out = []
    for entry in added:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str)):
            raise ValueError(f"{path}: an added token must be {{\"id\": number, \"content\": string, ...}}, "
                             f"got {entry!r:.80}")
        refuse_unmodelled_flags(entry, path, f"'added_tokens' entry {entry['id']}")
        out.append(entry)
    return out
