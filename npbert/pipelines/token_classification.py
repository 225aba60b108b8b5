"""pipeline("token-classification") (alias "ner"): a tag for every token, or entities grouped
from them, as transformers' TokenClassificationPipeline.

    n = content tokens of the text, M = max_length - 2 tokens per window, K = number of tags

    text -> WordPiece tokens with character offsets -> window(s) [CLS] t_i .. t_j [SEP]
         -> BertForTokenClassification -> logits (T, K) -> scores = softmax (T, K)
         -> one entry per token ("none"), or per word, then grouped into entities

aggregation_strategy (transformers' names):
    none     every token but the special ones: {"entity", "score", "index", "word", "start", "end"}
    simple   tokens grouped into entities: adjacent tokens of one type, a B- tag starting a new one
    first    a word takes the tag of its first token, then grouped as simple
    average  a word takes the tag of its tokens' mean scores
    max      a word takes the tag of its most confident token
A grouped entity is {"entity_group", "score" (mean over its tokens or words), "word", "start",
"end"}; tags in `ignore_labels` (default ["O"]) are left out.  A token continues a word when its
text is not the text it covers (the "##" prefix), as transformers decides it for WordPiece.

Long texts: without `stride` the text is cut after M tokens (the words after it get no tag, and
a warning says how many); with `stride` it is covered by windows of M tokens, each sharing
`stride` tokens with the one before (the windows transformers' fast tokenizers make with
return_overflowing_tokens), and entities found twice in the overlap are merged, keeping the
longer (or, as long, the more confident) one.
"""
import warnings

import numpy as np

from npbert.modeling import BertForTokenClassification
from npbert.pipelines.base import Pipeline, softmax
from npbert.tasks.records import tag_parts as get_tag
from npbert.tasks.windows import max_context_window, overflow_windows

AGGREGATIONS = ("none", "simple", "first", "average", "max")


def wordpiece_decode(tokens):
    """transformers' fast BERT tokenizer's convert_tokens_to_string (the WordPiece decoder):
    a "##" piece joins the one before, other tokens get a space; then each token's " ." " ,"
    " ?" " !" " n't" ... are cleaned up (token by token, as the decoder does it)."""
    out = []
    for i, token in enumerate(tokens):
        if i != 0:
            token = token[2:] if token.startswith("##") else " " + token
        for dirty, clean in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                             (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
            token = token.replace(dirty, clean)
        out.append(token)
    return "".join(out)


class TokenClassificationPipeline(Pipeline):
    task = "token-classification"
    model_class = BertForTokenClassification
    token_outputs = ("logits",)

    def _check_parameters(self, aggregation_strategy="none", ignore_labels=None, stride=None,
                          is_split_into_words=False, delimiter=None):
        if str(aggregation_strategy).lower() not in AGGREGATIONS:
            raise ValueError(f"aggregation_strategy must be one of {AGGREGATIONS}, got {aggregation_strategy!r}")
        if stride is not None:
            if str(aggregation_strategy).lower() == "none":
                raise ValueError('`stride` was given to cover the whole text, but aggregation_strategy="none": '
                                 'windows are merged by entity, choose "simple", "first", "average" or "max"')
            if not isinstance(stride, int) or not 0 <= stride < self.max_length - 2:
                raise ValueError(f"stride must be an integer in [0, {self.max_length - 2}) (the tokens of a window "
                                 f"without [CLS] and [SEP]), got {stride!r}")

    def __call__(self, inputs, batch_size=None, **kwargs):
        params = self._params(kwargs)
        if params.get("is_split_into_words") and inputs and not isinstance(inputs[0], (list, tuple)):
            return self._run_examples([inputs], batch_size, params)    # one sentence as words: a list of one
        return super().__call__(inputs, batch_size, **kwargs)

    # ---- preprocess: text -> content tokens with offsets -> windows --------------------------
    def _tokens(self, sentence, is_split_into_words, delimiter):
        """(sentence text, content ids, (start, end) of each in the sentence)."""
        tok = self.tokenizer
        if is_split_into_words:
            if not isinstance(sentence, (list, tuple)) or not all(isinstance(w, str) for w in sentence):
                raise ValueError("with is_split_into_words=True an input is a list of words (str)")
            delimiter = " " if delimiter is None else delimiter
            ids, offsets, start = [], [], 0
            for word in sentence:                     # each word alone, its offsets moved to its place
                enc = tok(word, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
                ids += enc["input_ids"]
                offsets += [(start + s, start + e) for s, e in enc["offset_mapping"]]
                start += len(word) + len(delimiter)
            return delimiter.join(sentence), ids, offsets
        if not isinstance(sentence, str):
            raise ValueError("an input must be a string (or, with is_split_into_words=True, a list of words)")
        enc = tok(sentence, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return sentence, list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def windows(self, ids, offsets, stride):
        """[(input_ids, offsets, special_tokens_mask, attention_mask)] (each (T,)): one window cut
        at M tokens without stride, else every window, padded to the longest."""
        tok = self.tokenizer
        M = self.max_length - 2
        spans = [(0, min(len(ids), M))] if stride is None else overflow_windows(len(ids), M, stride)
        T = max(stop - start for start, stop in spans) + 2
        out = []
        for start, stop in spans:
            n = stop - start + 2
            pad = T - n if stride is not None else 0
            input_ids = [tok.cls_token_id] + ids[start:stop] + [tok.sep_token_id] + [tok.pad_token_id] * pad
            offs = [(0, 0)] + offsets[start:stop] + [(0, 0)] * (1 + pad)
            special = [1] + [0] * (stop - start) + [1] * (1 + pad)
            out.append((input_ids, offs, special, [1] * n + [0] * pad))
        return out

    def word_tags(self, words, stride=None):
        """(tags, scores): one tag per given word, from its first token ("first" aggregation),
        read in the window where that token has the most context (every word gets one: a
        sentence longer than a window is read in windows sharing `stride` tokens, default half a
        window).  What `npbert predict` writes for CoNLL input."""
        _, ids, offsets = self._tokens(words, True, " ")
        firsts, position, k = [], 0, 0
        for word in words:                           # each word's first token: the first starting in it
            while k < len(ids) and offsets[k][0] < position:
                k += 1
            firsts.append(k if k < len(ids) and offsets[k][0] < position + max(len(word), 1) else None)
            position += len(word) + 1
        M = self.max_length - 2
        stride = M // 2 if stride is None else stride
        spans = overflow_windows(len(ids), M, stride)
        windows = self.windows(ids, offsets, stride)
        scores = [softmax(self._forward({"input_ids": np.asarray([w[0]]), "attention_mask": np.asarray([w[3]]),
                                         "token_type_ids": np.zeros((1, len(w[0])), dtype=np.int64)}).logits[0])
                  for w in windows]
        id2label = self.model.config.id2label
        tags, probs = [], []
        for first in firsts:
            if first is None:                        # a word with no token (e.g. only control characters)
                tags.append("O")
                probs.append(0.0)
                continue
            w = max_context_window(spans, first)
            row = scores[w][first - spans[w][0] + 1]
            tags.append(id2label[int(row.argmax())])
            probs.append(float(row.max()))
        return tags, probs

    # ---- one example -----------------------------------------------------------------------
    def _preprocess(self, sentence, aggregation_strategy="none", ignore_labels=None, stride=None,
                    is_split_into_words=False, delimiter=None):
        text, ids, offsets = self._tokens(sentence, is_split_into_words, delimiter)
        windows = self.windows(ids, offsets, stride)
        if stride is None and len(ids) > self.max_length - 2:
            warnings.warn(f"token-classification: the text is {len(ids) + 2} tokens long, the model takes "
                          f"{self.max_length}: the {len(ids) - (self.max_length - 2)} tokens after {text[:30]!r}... "
                          f"cut off get no tag; pass stride=N to cover the whole text with overlapping windows",
                          stacklevel=5)
        sequences = [{"input_ids": np.asarray(input_ids, dtype=np.int64),
                      "attention_mask": np.asarray(attention, dtype=np.int64),
                      "token_type_ids": np.zeros(len(input_ids), dtype=np.int64)}
                     for input_ids, offs, special, attention in windows]
        return sequences, (text, windows)

    def _postprocess(self, context, outputs, aggregation_strategy="none", ignore_labels=None, stride=None,
                     is_split_into_words=False, delimiter=None):
        text, windows = context
        strategy = str(aggregation_strategy).lower()
        ignore_labels = ["O"] if ignore_labels is None else ignore_labels
        entities = []
        for (input_ids, offs, special, attention), out in zip(windows, outputs):
            scores = softmax(out["logits"])                                   # (T, K)
            pre = self.gather_pre_entities(text, input_ids, scores, offs, special)
            entities += [e for e in self.aggregate(pre, strategy)
                         if e.get("entity") not in ignore_labels and e.get("entity_group") not in ignore_labels]
        if len(windows) > 1:
            entities = self.aggregate_overlapping_entities(entities)
        return entities

    def gather_pre_entities(self, sentence, input_ids, scores, offsets, special_tokens_mask):
        """Per non-special token: its token string (the covered text for [UNK]), scores (K,),
        character span, index in the window, and whether it continues a word."""
        pre = []
        for idx, token_scores in enumerate(scores):
            if special_tokens_mask[idx]:
                continue
            word = self.tokenizer.convert_ids_to_tokens(int(input_ids[idx]))
            start, end = (int(x) for x in offsets[idx])
            word_ref = sentence[start:end]
            is_subword = len(word) != len(word_ref)
            if int(input_ids[idx]) == self.tokenizer.unk_token_id:
                word, is_subword = word_ref, False
            pre.append({"word": word, "scores": token_scores, "start": start, "end": end, "index": idx,
                        "is_subword": is_subword})
        return pre

    def aggregate(self, pre_entities, strategy):
        id2label = self.model.config.id2label
        if strategy in ("none", "simple"):
            entities = []
            for pre in pre_entities:
                k = int(pre["scores"].argmax())
                entities.append({"entity": id2label[k], "score": pre["scores"][k], "index": pre["index"],
                                 "word": pre["word"], "start": pre["start"], "end": pre["end"]})
        else:
            entities = self.aggregate_words(pre_entities, strategy)
        return entities if strategy == "none" else self.group_entities(entities)

    def aggregate_word(self, entities, strategy):
        id2label = self.model.config.id2label
        if strategy == "first":
            scores = entities[0]["scores"]
        elif strategy == "max":
            scores = max(entities, key=lambda e: e["scores"].max())["scores"]
        elif strategy == "average":
            scores = np.nanmean(np.stack([e["scores"] for e in entities]), axis=0)
        else:
            raise ValueError(f"no word aggregation {strategy!r}")
        k = int(scores.argmax())
        return {"entity": id2label[k], "score": scores[k], "word": wordpiece_decode([e["word"] for e in entities]),
                "start": entities[0]["start"], "end": entities[-1]["end"]}

    def aggregate_words(self, entities, strategy):
        """Tokens -> words (a token continuing a word joins it), each with one tag."""
        words, group = [], None
        for entity in entities:
            if group is None:
                group = [entity]
            elif entity["is_subword"]:
                group.append(entity)
            else:
                words.append(self.aggregate_word(group, strategy))
                group = [entity]
        if group is not None:
            words.append(self.aggregate_word(group, strategy))
        return words

    def group_sub_entities(self, entities):
        return {"entity_group": entities[0]["entity"].split("-", 1)[-1],
                "score": np.mean(np.nanmean([e["score"] for e in entities])),
                "word": wordpiece_decode([e["word"] for e in entities]),
                "start": entities[0]["start"], "end": entities[-1]["end"]}

    def group_entities(self, entities):
        """Adjacent entries of one type form an entity; a B- tag starts a new one."""
        groups, current = [], []
        for entity in entities:
            if current:
                bi, tag = get_tag(entity["entity"])
                _, last_tag = get_tag(current[-1]["entity"])
                if not (tag == last_tag and bi != "B"):
                    groups.append(self.group_sub_entities(current))
                    current = []
            current.append(entity)
        if current:
            groups.append(self.group_sub_entities(current))
        return groups

    @staticmethod
    def aggregate_overlapping_entities(entities):
        """Entities of overlapping windows: of two that overlap, the longer one stays (as long:
        the higher score)."""
        if not entities:
            return entities
        entities = sorted(entities, key=lambda x: x["start"])
        kept, previous = [], entities[0]
        for entity in entities:
            if previous["start"] <= entity["start"] < previous["end"]:
                length, previous_length = entity["end"] - entity["start"], previous["end"] - previous["start"]
                if length > previous_length or length == previous_length and entity["score"] > previous["score"]:
                    previous = entity
            else:
                kept.append(previous)
                previous = entity
        kept.append(previous)
        return kept
