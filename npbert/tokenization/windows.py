"""return_overflowing_tokens=True as transformers' Rust tokenizer answers it: the text cut into
overlapping windows, each its own row (encode.py puts `overflow_to_sample_mapping` beside them).

    n = 10 tokens, room M = 4, stride S = 1:  [0, 4)  [3, 7)  [6, 10)   (step M - S)
    truncation_side="left": the same windows from the end: [6, 10)  [3, 7)  [0, 4)

The room of each sequence is that of the tokenizers library's `truncate_encodings`, the order of the
rows that of its `Encoding.merge_with`; tests/tokenization/test_overflow_windows.py compares them with
transformers' Rust BertTokenizer.
"""
from npbert.tokenization.alignment import RowLayout


class WindowsMixin:
    """Mixed into BertTokenizer; uses EncodeMixin's `_ids_of` and `_assemble`."""

    def _encode_windows(self, text, text_pair, add_special_tokens, truncation_strategy, max_length, stride,
                        return_token_type_ids, return_overflowing_tokens, return_special_tokens_mask,
                        return_offsets_mapping, verbose, layouts):
        """One text or pair -> its rows as the Rust tokenizer cuts them with
        return_overflowing_tokens=True: the sequence(s) too long cut into windows of the room
        left, consecutive windows sharing `stride` tokens.

            n = 10 tokens, room M = 4, stride S = 1:  [0, 4)  [3, 7)  [6, 10)   (step M - S)
            truncation_side="left": the same windows from the end: [6, 10)  [3, 7)  [0, 4)

        A pair with `longest_first` shares the room as the Rust tokenizer does (the shorter text
        keeps its length up to half the room); when both texts are cut, the rows are (A0, B0),
        then each later window of A with B0, B1, ..., then A0 with each later window of B."""
        ids, offsets = self._ids_of(text, return_offsets_mapping)
        pair = text_pair is not None
        pair_ids, pair_offsets = self._ids_of(text_pair, return_offsets_mapping) if pair else (None, None)
        lengths = [len(ids)] + ([len(pair_ids)] if pair else [])
        num_special = self.num_special_tokens_to_add(pair) if add_special_tokens else 0
        room = (max_length or 0) - num_special
        keep = lengths                                  # tokens per window of each sequence
        if truncation_strategy != "do_not_truncate" and max_length and sum(lengths) > room:
            if room < 1:
                raise ValueError(f"max_length={max_length} leaves no room for text beside the {num_special} special "
                                 f"tokens; use max_length > {num_special}.")
            keep = _window_lengths(lengths, room, truncation_strategy)
        cuts = [_windows(n, k, stride, self.truncation_side == "left") for n, k in zip(lengths, keep)]
        if not pair:
            combos = [(w,) for w in cuts[0]]
        else:       # tokenizers' Encoding.merge_with: (A0, B0), (Ai, B0), (Ai, Bj) ..., (A0, Bj)
            first, second = cuts
            combos = [(first[0], second[0])]
            for a in first[1:]:
                combos += [(a, b) for b in second]
            combos += [(first[0], b) for b in second[1:]]
        rows = []
        for combo in combos:
            (s, e), kept = combo[0], [combo[0]]
            row_pair = row_pair_offsets = None
            if pair:
                (ps, pe) = combo[1]
                kept.append(combo[1])
                row_pair = pair_ids[ps:pe]
                row_pair_offsets = pair_offsets[ps:pe] if pair_offsets is not None else None
            rows.append(self._assemble(ids[s:e], offsets[s:e] if offsets is not None else None, row_pair,
                                       row_pair_offsets, add_special_tokens, return_token_type_ids,
                                       return_special_tokens_mask, return_offsets_mapping, max_length, verbose))
            layouts.append(RowLayout((text, text_pair) if pair else (text,), tuple(kept), add_special_tokens))
        return rows


def _window_lengths(lengths, room, strategy):
    """How many tokens of each sequence one window holds (tokenizers' truncate_encodings)."""
    if len(lengths) == 1 or strategy == "only_first" or strategy == "only_second":
        which = 1 if strategy == "only_second" else 0
        if which >= len(lengths):
            raise ValueError("Truncation 'only_second' needs a second sequence; use another truncation strategy.")
        other = sum(lengths) - lengths[which]
        if room - other < 1:
            name = ("first", "second")[which]
            raise ValueError(f"Truncation '{strategy}' leaves no room for the {name} sequence: the other one and the "
                             f"special tokens fill max_length; use another truncation strategy or a larger max_length.")
        keep = list(lengths)
        keep[which] = room - other
        return keep
    n1, n2 = lengths                                   # longest_first on a pair
    short, long_ = min(n1, n2), max(n1, n2)
    long_ = short if short > room else max(short, room - short)
    if short + long_ > room:
        short, long_ = room // 2, room // 2 + room % 2
    return [short, long_] if n1 <= n2 else [long_, short]


def _windows(n, size, stride, from_the_end):
    """[(start, stop)] windows of `size` tokens over range(n), consecutive ones sharing `stride`."""
    if n <= size:
        return [(0, n)]
    if not 0 <= stride < size:
        raise ValueError(f"stride={stride} must be smaller than the tokens a window holds ({size}: max_length less "
                         "the special tokens and the other sequence)")
    spans, start = [], 0
    while True:
        stop = min(start + size, n)
        spans.append((start, stop))
        if stop >= n:
            break
        start += size - stride
    return [(n - e, n - s) for s, e in spans] if from_the_end else spans
