"""build_vocab against the `tokenizers` library's WordPieceTrainer, and hand-worked merges."""
import pytest

from npbert.data import corpus
from npbert.data.vocab import build_vocab
from npbert.tokenization import BertTokenizer


def test_hand_worked_merges():
    # words: low x3, lower x2 (BasicTokenizer lower-cases); pieces l ##o ##w / l ##o ##w ##e ##r
    vocab = build_vocab(["low low low", "lower lower"], vocab_size=5 + 5 + 4 + 3, min_frequency=1)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # alphabet by frequency (l, o, w: 5 each, then e, r: 2), ties by character
    assert vocab[5:10] == ["l", "o", "w", "e", "r"]
    assert vocab[10:14] == ["##o", "##w", "##e", "##r"]
    # merges: (l, ##o) 5 and (##o, ##w) 5 tie -> the lower ids first: l + ##o = "lo"; then lo + ##w = "low" (5);
    # then (low, ##e) 2 and (##e, ##r) 2 tie: ids (15, 12) > (12, 13), so "##er"
    assert vocab[14:] == ["lo", "low", "##er"]


def test_agrees_with_tokenizers_wordpiece_trainer():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers, trainers
    with open(corpus.corpus_path(), encoding="utf-8") as f:
        docs = corpus.shakespeare_documents(f.read()[:100000], 6)
    lines = [s for d in docs for s in d]
    tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(
        vocab_size=800, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], min_frequency=2))
    theirs, ours = set(tok.get_vocab()), build_vocab(lines, 800)
    assert len(ours) == len(theirs) == 800
    # the same pieces except where the last merges tie on count (tokenizers breaks ties in its
    # hash-map word order): measured 796 of 800 shared
    assert len(theirs & set(ours)) >= 790, sorted(theirs ^ set(ours))


def test_vocab_tokenizes_the_corpus(tmp_path):
    lines = ["Before we proceed any further, hear me speak.", "You are all resolved rather to die than to famish?"]
    path = tmp_path / "vocab.txt"
    from npbert.data.vocab import write_vocab
    write_vocab(build_vocab(lines * 2, 60), str(path))
    tok = BertTokenizer(str(path))
    for line in lines:
        assert "[UNK]" not in tok.tokenize(line)            # every character is in the alphabet
