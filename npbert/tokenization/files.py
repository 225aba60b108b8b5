"""A tokenizer directory: `vocab.txt` and `tokenizer_config.json`, read with checks, written whole.

    load_vocab(vocab_file)                   vocab.txt -> {token: id}, as transformers reads it
    BertTokenizer.from_pretrained(dir)       vocab.txt (or tokenizer.json) + tokenizer_config.json
                                             (+ special_tokens_map.json, added_tokens.json)
    BertTokenizer.from_pretrained(file)      that vocab.txt (or tokenizer.json) alone
    tok.save_pretrained(dir)                 vocab.txt + tokenizer_config.json (settings, added tokens),
                                             each through a temporary file + rename
    tok.save_vocabulary(dir)                 vocab.txt alone
    convert_tokens_to_ids(vocab, tokens)     Google's free functions (and convert_ids_to_tokens,
                                             convert_by_vocab)

A file that cannot be what it claims (not UTF-8, not a JSON object, a field of the wrong type, an
empty vocabulary, a special token the vocabulary lacks) stops with a ValueError naming the file,
the line or field, and what is wrong.  A field transformers reads that npbert does not model
(an added token's lstrip, rstrip or single_word, split_special_tokens: declared.py) is refused
the same way.  Nothing in a file is executed.
"""
import contextlib
import io
import json
import os

from npbert.io._atomic import atomic_write
from npbert.io.hub import HUB_ONLY_KEYWORDS, hub_name_message
from npbert.tokenization.declared import (check_token_fields, entries_to_save, listed_special_tokens,
                                          refuse_unmodelled_flags)
from npbert.tokenization.jsonfile import _json_kind, decode_utf8, read_json_object
from npbert.tokenization.tokenizer_json import read_tokenizer_json, tokens_in_id_order

VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
ADDED_TOKENS_FILE = "added_tokens.json"
TOKENIZER_FILE = "tokenizer.json"

# tokenizer_config.json keys from_pretrained does not hand to the constructor: the files' own names,
# and what transformers records about its loading and its call defaults (no effect on a tokenizer).
NOT_PASSED_ON = frozenset({
    "vocab_file", "tokenizer_file", "name_or_path", "tokenizer_class", "auto_map", "special_tokens_map_file",
    "added_tokens_decoder", "extra_special_tokens", "max_len", "backend", "is_local", "local_files_only",
    "max_length", "stride", "truncation_strategy", "pad_to_multiple_of", "pad_token_type_id", "processor_class",
    "split_special_tokens", "full_tokenizer_file", "use_fast", "legacy", "chat_template"})

SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# from_pretrained keywords that only concern downloading from a model hub (npbert/io/hub.py), and
# `from_tf`: a tokenizer has no TensorFlow weights.  Accepted, no effect.
HUB_ONLY_KEYWORDS = HUB_ONLY_KEYWORDS + ("from_tf",)

def read_vocab_lines(vocab_file):
    """vocab.txt -> its tokens, one per line (line i is id i).

    Lines end at "\\n", "\\r\\n" or "\\r" (universal newlines); only the line end is removed, so a
    token keeps any other trailing whitespace, as transformers reads it.
    """
    if isinstance(vocab_file, dict):        # {token: id}, as transformers 5's BertTokenizer(vocab=...) takes
        if not vocab_file:
            raise ValueError("The vocabulary {token: id} given is empty.")
        return tokens_in_id_order(vocab_file, "the vocabulary {token: id} given")
    vocab_file = os.fspath(vocab_file)
    if not os.path.isfile(vocab_file):
        raise ValueError(f"Can't find a vocabulary file at path '{vocab_file}'.")
    with open(vocab_file, "rb") as f:
        text = decode_utf8(f.read(), vocab_file)
    lines = [line.rstrip("\n") for line in io.StringIO(text, newline=None)]
    if not lines:
        raise ValueError(f"The vocabulary file '{vocab_file}' is empty: it must hold one token per line.")
    return lines


def load_vocab(vocab_file):
    """vocab.txt -> dict token -> id (the line number).  A repeated token keeps the id of its
    last line."""
    return {token: index for index, token in enumerate(read_vocab_lines(vocab_file))}


def convert_by_vocab(vocab, items):
    """Google's `convert_by_vocab`: each item looked up in `vocab` (a KeyError for one it lacks)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """Google's free function: tokens -> ids with `vocab` = load_vocab(...)."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Google's free function: ids -> tokens with `inv_vocab` = {id: token}."""
    return convert_by_vocab(inv_vocab, ids)


def token_content(value):
    """A token as written in a config or passed in code: "[UNK]", {"content": "[UNK]", ...} or an
    object with a `content` (transformers' AddedToken) -> "[UNK]"."""
    if isinstance(value, dict) and "content" in value:
        return value["content"]
    if not isinstance(value, str) and isinstance(getattr(value, "content", None), str):
        return value.content
    return value


def _is_token(value, optional):
    return isinstance(token_content(value), str) or (optional and value is None)


def _is_str_list(value):
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


# option -> (is the value acceptable?, what it must be)
_OPTION_TYPES = {
    "do_lower_case": (lambda v: isinstance(v, bool), "true or false"),
    "tokenize_chinese_chars": (lambda v: isinstance(v, bool), "true or false"),
    "do_basic_tokenize": (lambda v: isinstance(v, bool), "true or false"),
    "clean_up_tokenization_spaces": (lambda v: isinstance(v, bool), "true or false"),
    "strip_accents": (lambda v: v is None or isinstance(v, bool), "null, true or false"),
    "never_split": (lambda v: v is None or _is_str_list(v) or (isinstance(v, set) and _is_str_list(list(v))),
                    "null or a list of strings"),
    "model_input_names": (_is_str_list, "a list of strings"),
    "additional_special_tokens": (lambda v: isinstance(v, (list, tuple)) and all(_is_token(t, False) for t in v),
                                  "a list of tokens (strings)"),
    "padding_side": (lambda v: v in ("right", "left"), "'right' or 'left'"),
    "truncation_side": (lambda v: v in ("right", "left"), "'right' or 'left'"),
    "model_max_length": (lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 and v == v and v >= 1 and float(v).is_integer()),
                         "a positive whole number"),
    "max_input_chars_per_word": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                                 "a positive whole number"),
    "unk_token": (lambda v: _is_token(v, False), "a token (a string)"),
    "sep_token": (lambda v: _is_token(v, False), "a token (a string)"),
    "cls_token": (lambda v: _is_token(v, False), "a token (a string)"),
    "pad_token": (lambda v: _is_token(v, True), "a token (a string) or null"),
    "mask_token": (lambda v: _is_token(v, True), "a token (a string) or null"),
}


def check_options(options, where):
    """Raise a ValueError naming `where` and the field whose value has the wrong type."""
    for name, value in options.items():
        check = _OPTION_TYPES.get(name)
        if check is not None and not check[0](value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise ValueError(f"{where}: {name!r} must be {check[1]}, got {shown}")


class PretrainedFilesMixin:
    """from_pretrained / save_pretrained / save_vocabulary / check_fits for BertTokenizer."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *init_inputs, subfolder="", **kwargs):
        """Read `vocab.txt` (or, without it, the WordPiece vocabulary and normalizer options of
        `tokenizer.json`, as transformers 5 saves them) and, when present, `tokenizer_config.json`
        (and the legacy `special_tokens_map.json`) from a local directory.  Keyword arguments
        override the files, and the files' options those of tokenizer.json.  A path to a vocab.txt
        (or tokenizer.json) file reads that file alone.

        `subfolder` is a folder inside the directory.  The keywords that only concern a model hub
        (`cache_dir`, `force_download`, `local_files_only`, `revision`, `proxies`, `token`,
        `trust_remote_code`, `from_tf`, ...) are accepted and have no effect offline; `use_fast=False`
        gives the tokenizer that presents itself as transformers' Python one (`is_fast` False).
        """
        if init_inputs:
            raise TypeError("BertTokenizer.from_pretrained takes the directory and keyword arguments only")
        use_fast = kwargs.pop("use_fast", None)     # kept: use_fast=False presents the Python tokenizer
        for name in HUB_ONLY_KEYWORDS:
            kwargs.pop(name, None)
        if use_fast is not None:
            kwargs["use_fast"] = use_fast
        path = os.path.join(os.fspath(pretrained_model_name_or_path), subfolder) if subfolder \
            else os.fspath(pretrained_model_name_or_path)
        if os.path.isfile(path) and os.path.basename(path) != TOKENIZER_FILE:
            return cls(path, **kwargs)         # a vocab.txt file itself, as transformers takes it
        if os.path.isfile(path):
            tokens, init, added = read_tokenizer_json(path)
            check_options(init, path)
            init["added_tokens_decoder"], init["_added_tokens_source"] = _decoder(added), path
            return cls({token: index for index, token in enumerate(tokens)}, **{**init, **kwargs})
        if not os.path.isdir(path):
            raise ValueError(_not_a_directory(path))
        vocab_file = os.path.join(path, VOCAB_FILE)
        json_file = os.path.join(path, TOKENIZER_FILE)
        init, json_added = {}, None
        if not os.path.isfile(vocab_file) and os.path.isfile(json_file):
            # transformers 5 saves tokenizer.json only: its WordPiece vocabulary and BertNormalizer
            # options, under tokenizer_config.json and the keywords (transformers' order too)
            tokens, init, json_added = read_tokenizer_json(json_file)
            check_options(init, json_file)
            vocab_file = {token: index for index, token in enumerate(tokens)}
        elif not os.path.isfile(vocab_file):
            other = [f for f in ("spiece.model", "vocab.json") if os.path.isfile(os.path.join(path, f))]
            hint = f" (it has {', '.join(other)}: npbert reads BERT's vocab.txt or tokenizer.json)" if other else ""
            raise ValueError(f"Can't find a vocabulary file at path '{vocab_file}' (nor {TOKENIZER_FILE}){hint}.")

        config_file = os.path.join(path, TOKENIZER_CONFIG_FILE)
        config = read_json_object(config_file) if os.path.isfile(config_file) else {}
        check_token_fields(config, config_file)
        added = config.pop("added_tokens_decoder", None)
        if added is not None and not isinstance(added, dict):
            raise ValueError(f"{config_file}: 'added_tokens_decoder' must be an object {{id: token}}, got "
                             f"{_json_kind(added)}")
        for index, entry in (added or {}).items():
            refuse_unmodelled_flags(entry, config_file, f"'added_tokens_decoder' entry {index}")
        map_file = os.path.join(path, SPECIAL_TOKENS_MAP_FILE)
        if added is None and os.path.isfile(map_file):   # (as transformers: not read beside added_tokens_decoder)
            special_map = read_json_object(map_file)
            check_token_fields(special_map, map_file)
            config.update(special_map)
            config_file = f"{config_file} / {map_file}"
        listed = listed_special_tokens(config, config_file)   # extra_special_tokens, as transformers 5 reads it
        if listed is not None:
            config["additional_special_tokens"] = listed

        # (max_input_chars_per_word is an argument only: transformers does not read it from a file)
        init.update({key: value for key, value in config.items()
                     if key in _OPTION_TYPES and key != "max_input_chars_per_word" or key == "max_len"})
        # other keys go to the constructor as transformers passes them: kept in init_kwargs
        others = {key: value for key, value in config.items()
                  if key not in init and key not in _OPTION_TYPES and key not in NOT_PASSED_ON}
        if "max_len" in init:                 # the 2.x name
            init.setdefault("model_max_length", init["max_len"])
            del init["max_len"]
        check_options(init, config_file)
        init = {key: token_content(value) for key, value in init.items()}
        if isinstance(init.get("additional_special_tokens"), (list, tuple)):
            init["additional_special_tokens"] = [token_content(t) for t in init["additional_special_tokens"]]
        if isinstance(init.get("model_max_length"), float):
            init["model_max_length"] = int(init["model_max_length"])
        decoder = _decoder(json_added or [])
        decoder = _merge_decoders(decoder, added or {}, config_file)
        added_file = os.path.join(path, ADDED_TOKENS_FILE)
        if os.path.isfile(added_file):
            decoder = _merge_decoders(decoder, {i: t for t, i in read_json_object(added_file).items()}, added_file)
        init.update(others)
        init["added_tokens_decoder"] = decoder
        init["_added_tokens_source"] = " / ".join(
            f for f in (json_file if json_added else None, config_file if added else None,
                        added_file if os.path.isfile(added_file) else None) if f) or None
        init.update(kwargs)
        return cls(vocab_file, **init)

    def save_pretrained(self, save_directory, legacy_format=None, filename_prefix=None, push_to_hub=False, **kwargs):
        """Write `vocab.txt` and `tokenizer_config.json`; returns their paths.

        Both files are written to temporary files in `save_directory`, flushed to disk, and only
        then renamed over the old ones: a full disk or an error part-way leaves the old files as
        they were, and no temporary file behind.
        """
        if push_to_hub:
            raise ValueError("npbert does not upload to a model hub (push_to_hub=True)")
        save_directory = os.fspath(save_directory)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        vocab_file = os.path.join(save_directory, prefix + VOCAB_FILE)
        config_file = os.path.join(save_directory, prefix + TOKENIZER_CONFIG_FILE)
        vocab_bytes = self._vocab_file_text(vocab_file).encode("utf-8")
        config_bytes = (json.dumps(self._config_to_save(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        _write_whole(save_directory, [(vocab_file, vocab_bytes), (config_file, config_bytes)])
        return vocab_file, config_file

    def save_vocabulary(self, save_directory=None, filename_prefix=None, vocab_path=None):
        """Write the vocabulary alone (`vocab.txt`, or `<prefix>-vocab.txt`), atomically;
        returns `(path,)`.  A `save_directory` that is not a directory is taken as the file name.
        `vocab_path=` (pytorch-pretrained-bert 0.6's name) does the same and returns the path
        itself, as 0.6 did."""
        if vocab_path is not None:
            if save_directory is not None:
                raise TypeError("save_vocabulary: give save_directory or vocab_path (0.6's name), not both")
            return self.save_vocabulary(vocab_path, filename_prefix)[0]
        if save_directory is None:
            raise TypeError("save_vocabulary() needs save_directory: the folder (or file) to write vocab.txt to")
        save_directory = os.fspath(save_directory)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        if os.path.isdir(save_directory):
            vocab_file = os.path.join(save_directory, prefix + VOCAB_FILE)
        else:
            vocab_file = prefix + save_directory
        directory = os.path.dirname(os.path.abspath(vocab_file))
        _write_whole(directory, [(vocab_file, self._vocab_file_text(vocab_file).encode("utf-8"))])
        return (vocab_file,)

    def check_fits(self, config):
        """Raise a ValueError if a model with `config` (a BertConfig, or its dict) cannot embed
        every id of this vocabulary: the largest id must be below `config.vocab_size`."""
        vocab_size = config.get("vocab_size") if isinstance(config, dict) else getattr(config, "vocab_size", None)
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
            raise ValueError(f"check_fits: the model config has no integer vocab_size (got {vocab_size!r})")
        largest = len(self) - 1
        if largest >= vocab_size:
            token = self.ids_to_tokens[largest]
            raise ValueError(
                f"The tokenizer's vocabulary ({len(self)} tokens, ids up to {largest}: {token!r}) does not fit the "
                f"model: its config has vocab_size={vocab_size}, so ids from {vocab_size} on have no embedding. "
                "Use the vocab.txt the model was trained with.")

    def _config_to_save(self):
        """tokenizer_config.json: the options, as transformers writes them."""
        config = dict(self._init_config)
        config.update({name: getattr(self, name) for name in SPECIAL_TOKEN_NAMES})
        config.update({name: getattr(self, name) for name in ("bos_token", "eos_token") if getattr(self, name)})
        additional = list(self.additional_special_tokens or [])
        listed = [t for t in self._listed_special if t not in additional]
        if listed:           # add_tokens(..., special_tokens=True): transformers 5 lists them here
            config["extra_special_tokens"] = additional + listed
        elif additional:
            config["additional_special_tokens"] = additional
        if self.added_tokens_encoder or self._vocab_added:     # every token the files declared, and those added
            config["added_tokens_decoder"] = entries_to_save(self)
        if self.model_input_names != ["input_ids", "token_type_ids", "attention_mask"]:
            config["model_input_names"] = list(self.model_input_names)
        config.update(self._unused_init_kwargs)
        config.update(
            model_max_length=self.model_max_length,
            padding_side=self.padding_side,
            truncation_side=self.truncation_side,
            clean_up_tokenization_spaces=self.clean_up_tokenization_spaces,
            tokenizer_class="BertTokenizer",
        )
        return config

    def _vocab_file_text(self, vocab_file):
        """The lines of vocab.txt: the lines read, unless the vocabulary was changed since; then
        the tokens in id order, which must be 0, 1, 2, ... (a gap would shift every later id)."""
        lines = getattr(self, "_vocab_lines", None)
        if lines is None or len(self.vocab) > len(lines) or {t: i for i, t in enumerate(lines)} != self.vocab:
            by_id = sorted(self.vocab.items(), key=lambda kv: kv[1])
            for expected, (token, index) in enumerate(by_id):
                if index != expected:
                    raise ValueError(f"Cannot write {vocab_file}: the vocabulary has no token with id {expected} "
                                     f"(the next is {token!r} with id {index}); a vocab.txt gives token i line i")
            lines = [token for token, _ in by_id]
        return "".join(token + "\n" for token in lines)


def _write_whole(directory, files):
    """Write [(path, bytes), ...] into `directory`, each through a temporary file in that
    directory, flushed and fsync'ed, then renamed over its target.  Every temporary file is written
    before the first rename, so a failure while writing (a full disk) leaves every old file."""
    try:
        os.makedirs(directory, exist_ok=True)
        with contextlib.ExitStack() as stack:       # the renames happen as it closes, last file first
            handles = [stack.enter_context(atomic_write(path, "wb")) for path, _ in files]
            for handle, (_, data) in zip(handles, files):
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
    except OSError as error:
        raise OSError(error.errno, f"Saving the tokenizer into {directory} failed ({error.strerror or error}); "
                                   "the files there are unchanged", error.filename) from error


def _not_a_directory(path):
    return (f"from_pretrained expects a directory holding vocab.txt or tokenizer.json; '{path}' is not a directory."
            + hub_name_message(path, "tokenizers", "AutoTokenizer"))


def _decoder(added):
    """tokenizer.json's added tokens [{"id", "content", "special", ...}] -> {id: entry}."""
    return {entry["id"]: entry for entry in added}


def _merge_decoders(decoder, more, source):
    """Two {id: token} of the same tokenizer's files: they must agree where both give an id."""
    merged = dict(decoder)
    for index, token in more.items():
        try:
            index = int(index)
        except (TypeError, ValueError):
            raise ValueError(f"{source}: added token id {index!r} is not a number") from None
        if index in merged and token_content(merged[index]) != token_content(token):
            raise ValueError(f"{source} gives the id {index} to {token_content(token)!r}, another file of the "
                             f"tokenizer to {token_content(merged[index])!r}")
        merged.setdefault(index, token)
    return merged
