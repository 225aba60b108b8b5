"""The tokenizer's vocabulary, special tokens and added tokens (transformers' `add_tokens`,
`add_special_tokens`).

    tok.add_tokens(["covid", "<ent>"])               new ids len(tok), len(tok) + 1, ...; returns how many
    tok.add_special_tokens({"pad_token": "[PAD]",     sets the special token (adding it if it is new)
                            "additional_special_tokens": ["<e1>"]})
    model.resize_token_embeddings(len(tok))          the model gets rows for the new ids

An added token is never split: like a special token, it is cut out of the raw text wherever it is
written (longest match first) and becomes its id, and WordPiece never uses it as a piece.  A
non-special token added to a lower-casing tokenizer is stored lower-cased ("NewWord" -> "newword")
and found in the text lower-cased (tokenizer._segments_lowered), as transformers 4.x's Python
tokenizer and its Rust tokenizer find it.  `vocab` stays the vocab.txt
vocabulary (`vocab_size` its size); `len(tok)`, `get_vocab()`, `convert_tokens_to_ids` and
`decode` include the added tokens; `save_pretrained` writes them into tokenizer_config.json's
`added_tokens_decoder` (vocab.txt keeps the file's tokens), and `from_pretrained` reads them back.
"""
import re

import numpy as np

from npbert import unsupported
from npbert.tokenization.declared import entry_fields
from npbert.tokenization.fast import FastTextEncoder
from npbert.tokenization.files import SPECIAL_TOKEN_NAMES, token_content


# transformers' special-token attributes, in its order: BERT's five, and bos/eos, which BERT does not
# use but every transformers tokenizer has (None unless given or added)
SPECIAL_TOKEN_ATTRIBUTES = ("bos_token", "eos_token") + SPECIAL_TOKEN_NAMES


def _special_token(name):
    """A special-token attribute (`tok.pad_token`): a str or None.  Once the tokenizer is built,
    setting one (as tutorials write `tokenizer.pad_token = ...`) must name a token the tokenizer
    has, and updates what depends on it; `add_special_tokens` adds a new one.  None unsets it, as
    in transformers (without [CLS]/[SEP] no special tokens can then be added around a text, and
    without [UNK] an unknown word has no id: each is an error saying so when it happens)."""

    def get(self):
        return self.__dict__.get("_" + name)

    def set(self, value):
        value = None if value is None else str(token_content(getattr(value, "content", value)))
        if self.__dict__.get("_built") and value is not None and value not in self._all_ids:
            raise ValueError(f"{name} = {value!r}: the tokenizer has no such token; use "
                             f"tokenizer.add_special_tokens({{'{name}': {value!r}}}) to add it.")
        self.__dict__["_" + name] = value
        if self.__dict__.get("_built"):
            self._rebuild()

    return property(get, set)


def _special_token_id(name):
    """`tok.pad_token_id`: the id of the special token (None when unset); setting an id sets the
    token to the one with that id (None unsets it), as transformers' `*_token_id` setters do."""

    def get(self):
        return self._token_id(name)

    def set(self, value):
        if value is not None and (not isinstance(value, (int, np.integer)) or int(value) not in self.ids_to_tokens):
            raise ValueError(f"{name}_id = {value!r}: not an id of this tokenizer (0 .. {len(self) - 1})")
        setattr(self, name, None if value is None else self.ids_to_tokens[int(value)])

    return property(get, set)


class VocabularyMixin:
    """Mixed into BertTokenizer: its vocabulary, special tokens and added tokens."""

    bos_token = _special_token("bos_token")
    eos_token = _special_token("eos_token")
    unk_token = _special_token("unk_token")
    sep_token = _special_token("sep_token")
    pad_token = _special_token("pad_token")
    cls_token = _special_token("cls_token")
    mask_token = _special_token("mask_token")
    bos_token_id = _special_token_id("bos_token")
    eos_token_id = _special_token_id("eos_token")
    unk_token_id = _special_token_id("unk_token")
    sep_token_id = _special_token_id("sep_token")
    pad_token_id = _special_token_id("pad_token")
    cls_token_id = _special_token_id("cls_token")
    mask_token_id = _special_token_id("mask_token")

    @property
    def additional_special_tokens(self):
        """Special tokens beyond the named ones (a list; None once set to None, as transformers)."""
        return self.__dict__.get("_additional_special_tokens")

    @additional_special_tokens.setter
    def additional_special_tokens(self, tokens):
        if tokens is not None:
            if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)):
                raise ValueError(f"additional_special_tokens must be a list of tokens, got {tokens!r:.60}")
            tokens = [str(token_content(getattr(t, "content", t))) for t in tokens]
            unknown = [t for t in tokens if t not in self._all_ids] if self.__dict__.get("_built") else []
            if unknown:
                raise ValueError(f"additional_special_tokens: the tokenizer has no token(s) {unknown}; use "
                                 "tokenizer.add_special_tokens({'additional_special_tokens': [...]}) to add them.")
        self.__dict__["_additional_special_tokens"] = tokens
        if self.__dict__.get("_built"):
            self._rebuild()

    @property
    def additional_special_tokens_ids(self):
        return self.convert_tokens_to_ids(self.additional_special_tokens or [])

    @additional_special_tokens_ids.setter
    def additional_special_tokens_ids(self, ids):
        self.additional_special_tokens = [self.convert_ids_to_tokens(int(i)) for i in ids]

    # ------------------------------------------------------------------
    # Vocabulary and special tokens
    # ------------------------------------------------------------------

    # transformers' class attributes, for code that reads them
    SPECIAL_TOKENS_ATTRIBUTES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                                 "mask_token"]
    vocab_files_names = {"vocab_file": "vocab.txt"}
    pad_token_type_id = 0
    train_new_from_iterator = unsupported.refused_method(
        "train_new_from_iterator", "npbert trains no WordPiece vocabulary: train one with the `tokenizers` library "
        "(or Google's), save its vocab.txt and load it with BertTokenizer(vocab_file)")

    def get_added_vocab(self):
        """{token: id} of the tokens added beyond the vocabulary (transformers)."""
        return dict(self.added_tokens_encoder)

    @property
    def vocab_size(self):
        """The vocab.txt vocabulary's size (added tokens not counted, as in transformers)."""
        return len(self.vocab)

    def __len__(self):
        """vocab_size plus the added tokens: the embedding rows a model needs."""
        return len(self.vocab) + len(self.added_tokens_encoder)

    def get_vocab(self):
        return dict(self._all_ids)

    @property
    def added_tokens_decoder(self):
        """{id: token} of the tokens added beyond the vocabulary."""
        return {index: token for token, index in self.added_tokens_encoder.items()}

    @property
    def all_special_tokens(self):
        """[unk, sep, pad, cls, mask] (those not None), then additional ones, then those added with
        add_tokens(..., special_tokens=True), unique.  (A token a file's added_tokens_decoder marks
        special is not listed, as in transformers: declared.py.)"""
        tokens = []
        for name in SPECIAL_TOKEN_ATTRIBUTES:
            token = getattr(self, name)
            if token is not None and str(token) not in tokens:
                tokens.append(str(token))
        tokens += [t for t in self.additional_special_tokens or [] if t not in tokens]
        # tokens added with add_tokens(..., special_tokens=True) too (transformers 5)
        tokens += [t for t in self._listed_special if t not in tokens]
        return tokens

    @property
    def all_special_ids(self):
        return self.convert_tokens_to_ids(self.all_special_tokens)

    @property
    def special_tokens_map(self):
        special = {name: str(getattr(self, name)) for name in SPECIAL_TOKEN_ATTRIBUTES
                   if getattr(self, name) is not None}
        if self.additional_special_tokens:
            special["additional_special_tokens"] = list(self.additional_special_tokens)
        return special

    def _token_id(self, name):
        token = getattr(self, name)
        return None if token is None else self._all_ids.get(str(token), self._unk_id)

    def convert_tokens_to_ids(self, tokens):
        """A token or a list of tokens -> id(s); unknown tokens -> unk_token_id."""
        ids = self._all_ids
        if isinstance(tokens, str):
            return ids.get(tokens, self._unk_id)
        return [ids.get(token, self._unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        """An id or a list of ids -> token(s); unknown ids -> unk_token."""
        if isinstance(ids, (int, np.integer)):
            return self.ids_to_tokens.get(int(ids), self.unk_token)
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [
            self.ids_to_tokens.get(int(i), self.unk_token) for i in ids if int(i) not in skip
        ]

    # ------------------------------------------------------------------
    # Added tokens
    # ------------------------------------------------------------------

    def add_tokens(self, new_tokens, special_tokens=False):
        """Add tokens beyond the vocabulary: each new one gets the next id (`len(self)`) and is
        never split.  A token already known is not added again; one that is a vocabulary entry keeps
        its id and is from now on kept whole in a text, as transformers does.  Returns how many were
        added (beyond the vocabulary)."""
        return self._add_tokens(new_tokens, special_tokens, list_special=True)

    def _add_tokens(self, new_tokens, special_tokens, list_special):
        """add_tokens; `list_special`: a new special token goes into all_special_tokens (add_tokens
        lists it, add_special_tokens lists its tokens itself)."""
        if isinstance(new_tokens, str) or not isinstance(new_tokens, (list, tuple)):
            new_tokens = [new_tokens]
        added = 0
        for token in new_tokens:
            content = token_content(getattr(token, "content", token))
            if content == "":                  # as transformers: nothing to add
                continue
            if not isinstance(content, str):
                raise ValueError(f"add_tokens: a token must be a string, got {token!r:.60}")
            special = special_tokens or bool(getattr(token, "special", False))
            normalized = bool(getattr(token, "normalized", not special))
            if not special and normalized and self.do_lower_case:
                content = content.lower()
            if content in self._vocab_added or content in self.added_tokens_encoder:
                continue                                  # known already: as it was
            if content in self.vocab:                     # a vocabulary entry: kept whole from now on
                self._vocab_added[content] = self.vocab[content]
                self._added_special[content], self._added_normalized[content] = special, normalized
            else:
                self._append_added(content, special, normalized)
                added += 1
            if special and list_special:
                self._listed_special.append(content)
        self._rebuild()
        return added

    def _append_added(self, content, special, normalized):
        """Give `content` the next id, after the vocabulary and the tokens added before it."""
        index = len(self)
        self.added_tokens_encoder[content] = index
        self.ids_to_tokens[index] = content
        self._added_special[content] = special
        self._added_normalized[content] = normalized
        self._all_ids = {**self.vocab, **self.added_tokens_encoder}

    def add_special_tokens(self, special_tokens_dict, replace_additional_special_tokens=True):
        """Set special tokens ({"pad_token": "[PAD]", "additional_special_tokens": [...]}), adding
        the new ones beyond the vocabulary; returns how many were added."""
        if not isinstance(special_tokens_dict, dict):
            raise TypeError(f"add_special_tokens takes a dict {{name: token}}, got {type(special_tokens_dict).__name__}")
        names = SPECIAL_TOKEN_ATTRIBUTES + ("additional_special_tokens", "extra_special_tokens")
        unknown = [key for key in special_tokens_dict if key not in names]
        if unknown:
            raise ValueError(f"add_special_tokens: {unknown} are not special-token names; use one of {list(names)}")
        added = 0
        for key, value in special_tokens_dict.items():
            if key in ("additional_special_tokens", "extra_special_tokens"):
                if isinstance(value, str) or not isinstance(value, (list, tuple)):
                    raise ValueError(f"add_special_tokens: {key} must be a list of tokens, got {value!r:.60}")
                tokens = [str(token_content(getattr(t, "content", t))) for t in value]
                added += self._add_tokens(tokens, True, list_special=False)
                kept = [] if replace_additional_special_tokens else (self.additional_special_tokens or [])
                self.additional_special_tokens = kept + [t for t in tokens if t not in kept]
            else:
                token = str(token_content(getattr(value, "content", value)))
                added += self._add_tokens([token], True, list_special=False)
                self.__dict__["_" + key] = token
        self._rebuild()
        return added

    def _segments(self, text):
        """Cut `text` at special and added tokens: [(start, end, token_or_None), ...]."""
        if self._match_lowered:
            return self._segments_lowered(text)
        if not any(ch in text for ch in self._special_first_chars):
            return [(0, len(text), None)]  # BERT's usual special tokens all start with "["
        segments, start = [], 0
        for m in self._special_token_re.finditer(text):
            if start < m.start():
                segments.append((start, m.start(), None))
            segments.append((m.start(), m.end(), m.group()))
            start = m.end()
        if start < len(text):
            segments.append((start, len(text), None))
        return segments

    def _segments_lowered(self, text):
        """`_segments` for a lower-casing tokenizer with added (non-special) tokens: as
        transformers' Python tokenizer (4.x) and its Rust tokenizer do, every token is first found
        as written; then, in the text between, the tokens declared `normalized` (non-special) are
        found in that text lower-cased character by character, so "NewWord" finds the added
        "newword" (and "[SEP]" or a special "<e1>" is not found in "[sep]", "<E1>").  The spans are
        those of the original text."""
        segments, pos = [], 0
        for m in self._special_token_re.finditer(text):
            segments += self._lowered_matches(text, pos, m.start())
            segments.append((m.start(), m.end(), m.group()))
            pos = m.end()
        return segments + self._lowered_matches(text, pos, len(text))

    def _lowered_matches(self, text, start, end):
        """text[start:end] lower-cased -> its segments at the normalized tokens, in `text`'s offsets."""
        view, raw_start, raw_end = [], [], []           # per character of the lower-cased view
        for i in range(start, end):
            chars = text[i].lower()                      # "İ" lowers to two characters
            view.append(chars)
            raw_start.extend([i] * len(chars))
            raw_end.extend([i + 1] * len(chars))
        segments, pos = [], start
        for m in self._lowered_token_re.finditer("".join(view)):
            m_start, m_end = raw_start[m.start()], raw_end[m.end() - 1]
            if pos < m_start:
                segments.append((pos, m_start, None))
            segments.append((m_start, m_end, m.group()))
            pos = m_end
        return segments + ([(pos, end, None)] if pos < end else [])

    def _register_added_tokens(self, decoder, where):
        """`added_tokens_decoder` ({id: token or {"content": ..., "special": ...}}, as
        tokenizer_config.json / tokenizer.json / added_tokens.json hold it, declared.py): an id
        inside the vocabulary must be its own entry, which is then kept whole in a text (special or
        not, as transformers keeps it); the others are added tokens, ids len(vocab), +1, ..."""
        beyond = []
        for index, token in (decoder or {}).items():
            index, content, special, normalized = entry_fields(index, token, where)
            if index < len(self.vocab):
                if self.vocab.get(content) != index:
                    raise ValueError(f"{where} gives the token {content!r} the id {index}, which is "
                                     f"{self.ids_to_tokens.get(index)!r} in the vocabulary.")
                self._vocab_added[content] = index
                self._added_special[content], self._added_normalized[content] = special, normalized
            else:
                beyond.append((index, content, special, normalized))
        for index, content, special, normalized in sorted(beyond):
            if index != len(self) or content in self.vocab or content in self.added_tokens_encoder:
                raise ValueError(f"{where}: the added token {content!r} has the id {index}, but the next free id "
                                 f"is {len(self)} (added tokens follow the vocabulary without gaps or repeats)")
            self._append_added(content, special, normalized)
        self._all_ids = {**self.vocab, **self.added_tokens_encoder} if self.added_tokens_encoder else self.vocab

    def _rebuild(self):
        """What depends on the special and added tokens: the regex that cuts them out of the text,
        the BasicTokenizer's never_split, the ids of [UNK]/[CLS]/[SEP], a fresh fast-path cache."""
        self._all_ids = {**self.vocab, **self.added_tokens_encoder} if self.added_tokens_encoder else self.vocab
        # The text is first cut at special and added tokens written in it: longest first, matched
        # on the raw text (transformers' added-tokens trie does the same).
        whole = list(dict.fromkeys(self.all_special_tokens + list(self.added_tokens_encoder) + list(self._vocab_added)))
        self._segment_ids = {token: self._all_ids[token] for token in whole}
        specials = sorted(whole, key=len, reverse=True)
        self._special_token_re = re.compile("|".join(re.escape(t) for t in specials))
        self._special_first_chars = {t[0] for t in specials}
        # The BasicTokenizer never splits special tokens (transformers passes them as
        # `never_split` when it tokenizes the text between them).
        self._never_split = self.basic_tokenizer.never_split | set(self.all_special_tokens)
        # added tokens found in the lower-cased text (tokenizer._segments_lowered)
        lowered = sorted((t for t in self._added_special if not self._added_special[t] and self._added_normalized[t]),
                         key=len, reverse=True)
        self._match_lowered = self.do_lower_case and bool(lowered)
        self._lowered_token_re = re.compile("|".join(re.escape(t) for t in lowered))
        # (None once set to None: an unknown word, or [CLS]/[SEP] around a text, is then an error)
        self._unk_id, self._cls_id, self._sep_id = (None if token is None else self._all_ids[str(token)]
                                                    for token in (self.unk_token, self.cls_token, self.sep_token))
        self.wordpiece_tokenizer.unk_token = None if self.unk_token is None else str(self.unk_token)
        self._fast = FastTextEncoder(self)
        self._built = True
