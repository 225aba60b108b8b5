"""What a tokenizer's files declare about its special and added tokens, read as transformers 5 reads it.

Four places declare tokens, each an entry {"content", "special", "normalized", "lstrip", "rstrip",
"single_word"} (or a bare string):

    tokenizer_config.json  "added_tokens_decoder": {id: entry}; "unk_token" ... "mask_token",
                           "additional_special_tokens": [entry], "extra_special_tokens"
    special_tokens_map.json  the same named tokens and "additional_special_tokens" (read only when
                           tokenizer_config.json has no "added_tokens_decoder", as transformers)
    added_tokens.json      {content: id}
    tokenizer.json         "added_tokens": [{"id", "content", ...}]

An entry's id may lie inside the vocabulary (vocab.txt's line 47 "<ent>", marked special) or
beyond it (a token added after it).  Either way the token is cut out of the text whole, as
transformers does; beyond the vocabulary it also gets its id.  Neither kind is in
`all_special_tokens` unless a named token or `additional_special_tokens` /
`extra_special_tokens` lists it (transformers lists them only then, and skips only those when it
decodes with skip_special_tokens=True).

npbert models `special` and `normalized`.  It does not strip the spaces around a token (`lstrip`,
`rstrip`) nor match it only as a whole word (`single_word`): a file that sets one of those true is
refused with the file, the field and the token, rather than read into a tokenizer that would
split the text differently.  So is `split_special_tokens: true` (the special tokens written in a
text then go through WordPiece), which npbert does not do.
"""
import json

from npbert.tokenization.jsonfile import _json_kind

# flags of an entry npbert does not model: each must be false (or absent)
UNMODELLED_FLAGS = ("lstrip", "rstrip", "single_word")


def refuse_unmodelled_flags(entry, where, field):
    """A token entry that sets lstrip, rstrip or single_word true -> ValueError naming the file and field."""
    if not isinstance(entry, dict):
        return
    for flag in UNMODELLED_FLAGS:
        if entry.get(flag, False) not in (False, None):
            raise ValueError(f"{where}: {field} ({entry.get('content')!r}) has '{flag}': {json.dumps(entry[flag])}; "
                             f"npbert does not model {flag} (only 'special' and 'normalized'): set it to false")


def check_token_fields(config, where):
    """The named tokens and additional_special_tokens of tokenizer_config.json or
    special_tokens_map.json: refuse a flag npbert does not model, and split_special_tokens true."""
    split = config.get("split_special_tokens", False)
    if split not in (False, None):
        raise ValueError(f"{where}: 'split_special_tokens' is {json.dumps(split)}; npbert always keeps special "
                         "tokens written in a text whole: set it to false")
    for name, value in config.items():
        if name.endswith("_token"):
            refuse_unmodelled_flags(value, where, repr(name))
    for key in ("additional_special_tokens", "extra_special_tokens"):
        values = config.get(key)
        values = list(values.values()) if isinstance(values, dict) else values
        for value in values if isinstance(values, (list, tuple)) else ():
            refuse_unmodelled_flags(value, where, repr(key))


def listed_special_tokens(config, where):
    """tokenizer_config.json's `additional_special_tokens` and `extra_special_tokens` -> the list
    that becomes `additional_special_tokens`, as transformers 5 resolves the two:
    a non-empty list under extra_special_tokens replaces additional_special_tokens; a {name: token}
    object's tokens come first, then additional_special_tokens; an empty one changes nothing."""
    extra = config.pop("extra_special_tokens", None)
    additional = config.get("additional_special_tokens")
    if extra is None or extra == [] or extra == {}:
        return additional
    if isinstance(extra, dict):
        return list(extra.values()) + [t for t in additional or [] if t not in extra.values()]
    if not isinstance(extra, (list, tuple)):
        raise ValueError(f"{where}: 'extra_special_tokens' must be a list of tokens or an object {{name: token}}, "
                         f"got {_json_kind(extra)}")
    return list(extra)


def entry_fields(index, token, where):
    """One entry of added_tokens_decoder (a dict, a transformers AddedToken, or a string) ->
    (id, content, special, normalized), or a ValueError naming `where`."""
    try:
        index = int(index)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: added token id {index!r} is not a number") from None
    content = token.get("content") if isinstance(token, dict) else getattr(token, "content", token)
    if not isinstance(content, str):
        raise ValueError(f"{where}: the added token at id {index} must be a string, got {content!r:.60}")
    refuse_unmodelled_flags(token, where, f"the added token at id {index}")

    def flag(name, default):
        value = token.get(name, default) if isinstance(token, dict) else getattr(token, name, default)
        return default if value is None else bool(value)

    special = flag("special", False)
    return index, content, special, flag("normalized", not special)


def entries_to_save(tokenizer):
    """tokenizer_config.json's added_tokens_decoder as transformers writes it: every token the
    files declared (inside the vocabulary too) and every token added, in id order."""
    declared = {**tokenizer._vocab_added, **tokenizer.added_tokens_encoder}
    return {str(index): {"content": token, "lstrip": False, "normalized": tokenizer._added_normalized[token],
                         "rstrip": False, "single_word": False, "special": tokenizer._added_special[token]}
            for token, index in sorted(declared.items(), key=lambda kv: kv[1])}
