"""Learn a WordPiece vocabulary from a corpus, as the `tokenizers` library's WordPieceTrainer does.

    1. words: the corpus through BERT's BasicTokenizer (lower-casing, accents stripped,
       punctuation and CJK characters split off), counted
    2. alphabet: every character; a word starts as its first character followed by its other
       characters as continuation pieces: "king" -> k ##i ##n ##g
    3. merges: repeatedly join the most frequent adjacent pair of pieces in the corpus (counted
       over word occurrences), "k" + "##i" -> "ki", "##n" + "##g" -> "##ng", until the
       vocabulary has vocab_size entries or no pair occurs min_frequency times
    4. vocab.txt: the special tokens first ([PAD] [UNK] [CLS] [SEP] [MASK]), then the
       characters, the continuation characters, and the merged pieces in the order learned

It is byte-pair encoding (Sennrich et al. 2016) with WordPiece's "##" continuations; BERT's
WordPiece then tokenizes greedily, longest piece first.  Ties between equally frequent pairs
go to the lexicographically smallest pair (deterministic; the tokenizers library breaks them
by internal ids).  A small vocabulary makes a small model fast: the MLM decoder's cost grows
with it.
"""
import collections
import heapq

from npbert.io._atomic import atomic_write
from npbert.tokenization import BasicTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def count_words(lines, do_lower_case=True):
    """Counter of BasicTokenizer words over the lines."""
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    for line in lines:
        counts.update(basic.tokenize(line))
    return counts


def _merge(symbols, a, b, new):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_wordpiece_vocab(word_counts, vocab_size, min_frequency=2, limit_alphabet=1000,
                          special_tokens=SPECIAL_TOKENS, progress=None):
    """The vocabulary (a list of tokens) learned from {word: count}."""
    if vocab_size < len(special_tokens) + 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no room beside the {len(special_tokens)} special tokens")
    if not word_counts:
        raise ValueError("no words to learn a vocabulary from: the corpus is empty")
    # The alphabet: the limit_alphabet most frequent characters (the rest become [UNK]).
    chars = collections.Counter()
    for word, c in word_counts.items():
        for ch in word:
            chars[ch] += c
    alphabet = set(sorted(chars, key=lambda ch: (-chars[ch], ch))[:limit_alphabet])
    words, counts = [], []
    for word, c in word_counts.items():
        if all(ch in alphabet for ch in word):
            words.append([word[0]] + ["##" + ch for ch in word[1:]])
            counts.append(c)
    vocab = list(special_tokens)
    seen = set(vocab)
    initial = sorted({w[0] for w in words}) + sorted({s for w in words for s in w[1:]})
    for tok in initial:
        if tok not in seen:
            vocab.append(tok)
            seen.add(tok)

    pair_counts = collections.Counter()
    where = collections.defaultdict(set)
    for k, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += counts[k]
            where[pair].add(k)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -neg:              # stale entry: the count changed since
            if pair_counts.get(pair, 0) > 0:
                heapq.heappush(heap, (-pair_counts[pair], pair))
            continue
        if -neg < min_frequency:
            break
        a, b = pair
        new = a + (b[2:] if b.startswith("##") else b)
        if new not in seen:
            vocab.append(new)
            seen.add(new)
        changed = set()
        for k in list(where[pair]):
            old = words[k]
            merged = _merge(old, a, b, new)
            if merged == old:
                continue
            for p in zip(old, old[1:]):
                pair_counts[p] -= counts[k]
                where[p].discard(k)
                changed.add(p)
            for p in zip(merged, merged[1:]):
                pair_counts[p] += counts[k]
                where[p].add(k)
                changed.add(p)
            words[k] = merged
        for p in changed:
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
            else:
                pair_counts.pop(p, None)
        if progress:
            progress(len(vocab), vocab_size)
    return vocab


def build_vocab(input_files, vocab_size, output_file=None, do_lower_case=True, min_frequency=2, limit_alphabet=1000):
    """Learn a vocabulary from text files (any layout: every line is read) and write vocab.txt
    (one token a line, atomically) when output_file is given.  Returns the list of tokens."""
    def lines():
        for path in input_files:
            try:
                with open(path, encoding="utf-8") as f:
                    yield from f
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not UTF-8 text (byte {e.start})") from None
    vocab = learn_wordpiece_vocab(count_words(lines(), do_lower_case), vocab_size, min_frequency, limit_alphabet)
    if output_file:
        with atomic_write(output_file, "w") as f:
            f.write("\n".join(vocab) + "\n")
    return vocab
