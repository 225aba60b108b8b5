"""Learn a WordPiece vocabulary from text, as the `tokenizers` library's WordPieceTrainer does.

WordPieceTrainer is a BPE trainer with the continuing-subword prefix "##":
  1. words: the BasicTokenizer's tokens of every line (lower-cased, accents stripped, punctuation
     split off), counted;
  2. alphabet: every character of those words; a word starts as its characters, the first one
     bare and the others with "##" ("know't" -> k ##n ##o ##w ##' ##t);
  3. merges: repeatedly the most frequent adjacent pair (counted over words x word counts) is
     merged into one piece; "k" + "##n" -> "kn", "##o" + "##w" -> "##ow" (the second piece's
     "##" is dropped, the first's kept); until the vocabulary has vocab_size entries or no pair
     occurs min_frequency times.
The vocabulary is: the special tokens first ([PAD] [UNK] [CLS] [SEP] [MASK], ids 0..4 as in
BERT's vocabularies' order of appearance), then the alphabet (most frequent first), then the
"##" characters, then the merged pieces in the order they were learned.

Ties between pairs of equal count go to the pair of lower ids (tokenizers does the same; its
word order, a hash map's, differs, so ids can differ from tokenizers' where counts tie, while
the learned pieces agree: tests/data/test_vocab.py).
"""
import collections
import heapq

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PREFIX = "##"


def count_words(lines, do_lower_case=True):
    """Counter of BasicTokenizer tokens over the lines."""
    from npbert.tokenization.basic import BasicTokenizer
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    for line in lines:
        counts.update(basic.tokenize(line))
    return counts


def build_vocab(lines, vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS, do_lower_case=True,
                max_input_chars_per_word=100):
    """Learn a WordPiece vocabulary (a list of tokens; id = index) from an iterable of text lines."""
    word_counts = count_words(lines, do_lower_case)
    word_counts = {w: c for w, c in word_counts.items() if len(w) <= max_input_chars_per_word}
    if not word_counts:
        raise ValueError("no words in the text: cannot learn a vocabulary")
    vocab = list(dict.fromkeys(special_tokens))
    if vocab_size <= len(vocab):
        raise ValueError(f"vocab_size={vocab_size} leaves no room after the {len(vocab)} special tokens")
    ids = {t: i for i, t in enumerate(vocab)}

    def add(token):
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
        return ids[token]

    # 2. the alphabet, most frequent character first (ties by character)
    char_counts = collections.Counter()
    for w, c in word_counts.items():
        for ch in w:
            char_counts[ch] += c
    for ch, _ in sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        add(ch)
    # words as lists of ids: first character bare, the rest "##"-prefixed
    words, counts = [], []
    for w, c in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        words.append([ids[w[0]]] + [add(PREFIX + ch) for ch in w[1:]])
        counts.append(c)

    # 3. pair counts, and which words hold each pair
    pair_counts = collections.Counter()
    where = collections.defaultdict(set)
    for wi, (pieces, c) in enumerate(zip(words, counts)):
        for a, b in zip(pieces, pieces[1:]):
            pair_counts[(a, b)] += c
            where[(a, b)].add(wi)
    heap = [(-c, a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, a, b = heapq.heappop(heap)
        if pair_counts.get((a, b), 0) != -neg:       # stale entry: the count changed since it was pushed
            continue
        if -neg < max(min_frequency, 1):
            break
        right = vocab[b][len(PREFIX):] if vocab[b].startswith(PREFIX) else vocab[b]
        new = add(vocab[a] + right)
        changed = set()
        for wi in where.pop((a, b), ()):
            pieces, c = words[wi], counts[wi]
            for p in zip(pieces, pieces[1:]):         # remove this word's old pairs
                pair_counts[p] -= c
                changed.add(p)
            merged, k = [], 0
            while k < len(pieces):
                if k + 1 < len(pieces) and pieces[k] == a and pieces[k + 1] == b:
                    merged.append(new)
                    k += 2
                else:
                    merged.append(pieces[k])
                    k += 1
            words[wi] = merged
            for p in zip(merged, merged[1:]):         # and add its new ones
                pair_counts[p] += c
                where[p].add(wi)
                changed.add(p)
        pair_counts.pop((a, b), None)
        for p in changed:
            c = pair_counts.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p[0], p[1]))
            else:
                pair_counts.pop(p, None)
    return vocab


def write_vocab(vocab, path):
    """vocab.txt: one token a line, id = line number; written atomically."""
    from npbert.io._atomic import atomic_write
    with atomic_write(path, "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    return path
