"""Instances of npbert.data.pretraining equal Google's create_pretraining_data.py (bert-tensorflow 1.0.4)
field by field, for several seeds and argument sets, on sample_text.txt and a Shakespeare slice."""
import os
import random

import pytest

from npbert.data import corpus, pretraining
from npbert.data.vocab import build_vocab, write_vocab
from npbert.tokenization import BertTokenizer

google_reference = pytest.importorskip("google_reference")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """sample_text.txt and 120 speeches of Shakespeare as documents, a vocabulary learned from both."""
    d = tmp_path_factory.mktemp("corpus")
    sample = corpus.corpus_path("sample_text.txt")
    with open(corpus.corpus_path()) as f:
        text = f.read()[:60000]
    shakespeare = corpus.write_documents(corpus.shakespeare_documents(text, 6), str(d / "shakespeare.txt"))
    with open(sample) as f1, open(shakespeare) as f2:
        lines = f1.read().split("\n") + f2.read().split("\n")
    vocab = write_vocab(build_vocab(lines, 600), str(d / "vocab.txt"))
    return {"sample": sample, "shakespeare": shakespeare, "vocab": vocab}


def fields(inst):
    return (inst.tokens, inst.segment_ids, inst.masked_lm_positions, inst.masked_lm_labels, inst.is_random_next)


def test_tokenizer_equals_google_fulltokenizer(files):
    tokenization = google_reference.load("tokenization")
    google = tokenization.FullTokenizer(files["vocab"], do_lower_case=True)
    ours = BertTokenizer(files["vocab"], do_lower_case=True)
    for name in ("sample", "shakespeare"):
        with open(files[name]) as f:
            for line in f:
                assert ours.tokenize(line.strip()) == google.tokenize(line.strip()), line


@pytest.mark.parametrize("seed,name,max_seq_length,dupe_factor,short_seq_prob,masked_lm_prob,max_pred", [
    (12345, "sample", 128, 2, 0.1, 0.15, 20),
    (0, "sample", 32, 3, 0.5, 0.2, 5),
    (7, "shakespeare", 64, 2, 0.1, 0.15, 10),
    (99, "shakespeare", 20, 1, 0.9, 0.3, 3),
])
def test_instances_equal_google(files, seed, name, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
                                max_pred):
    cpd = google_reference.load("create_pretraining_data")
    tokenization = google_reference.load("tokenization")
    google_tok = tokenization.FullTokenizer(files["vocab"], do_lower_case=True)
    theirs = cpd.create_training_instances([files[name]], google_tok, max_seq_length, dupe_factor, short_seq_prob,
                                           masked_lm_prob, max_pred, random.Random(seed))
    ours = pretraining.create_training_instances([files[name]], BertTokenizer(files["vocab"]), max_seq_length,
                                                 dupe_factor, short_seq_prob, masked_lm_prob, max_pred,
                                                 random.Random(seed))
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert fields(a) == fields(b)


def test_whole_word_mask_hand_worked():
    """Hand-worked: with whole-word masking, ##-pieces are masked with the piece before them and
    a word that does not fit the remaining budget is skipped."""
    tokens = ["[CLS]", "un", "##want", "##ed", "run", "##ning", "[SEP]", "a", "[SEP]"]
    vocab = sorted(set(tokens))
    for seed in range(50):
        out, positions, labels = pretraining.create_masked_lm_predictions(
            tokens, 0.5, 4, vocab, random.Random(seed), do_whole_word_mask=True)
        # num_to_predict = min(4, round(9 * 0.5) = 4) = 4: words are {1,2,3}, {4,5}, {7}
        words = [{1, 2, 3}, {4, 5}, {7}]
        chosen = set(positions)
        for w in words:
            assert w <= chosen or not (w & chosen)              # a word is all in or all out
        assert len(positions) <= 4 and positions == sorted(positions)
        assert labels == [tokens[p] for p in positions]
        assert all(out[i] == tokens[i] for i in range(len(tokens)) if i not in chosen)
        # the first word that fits is always taken, so at least one prediction
        assert len(positions) >= 1


def test_whole_word_mask_properties(files):
    tok = BertTokenizer(files["vocab"])
    instances = pretraining.create_training_instances([files["shakespeare"]], tok, 48, 2, 0.1, 0.15, 8,
                                                      random.Random(3), do_whole_word_mask=True)
    n_continuations = 0
    for inst in instances:
        chosen = set(inst.masked_lm_positions)
        for p in chosen:
            orig = inst.masked_lm_labels[inst.masked_lm_positions.index(p)]
            assert inst.tokens[p] in ("[MASK]", orig) or inst.tokens[p] in tok.vocab
        # reconstruct the original tokens; every word is masked whole
        original = list(inst.tokens)
        for p, lab in zip(inst.masked_lm_positions, inst.masked_lm_labels):
            original[p] = lab
        # a "##" piece goes with the previous non-special piece (as Google's script, even across
        # the middle [SEP] when truncation cut a word); after [CLS] it stands alone
        for i, t in enumerate(original):
            before = [j for j in range(1, i) if original[j] not in ("[CLS]", "[SEP]")]
            if t.startswith("##") and before:
                n_continuations += 1
                assert (i in chosen) == (before[-1] in chosen), (original, sorted(chosen))
        assert len(chosen) <= 8
    assert n_continuations > 0                  # the property was exercised


def test_shakespeare_documents():
    text = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
            "First Citizen:\nYou are all resolved rather to die than to famish? Resolved!\nIs't a verdict?\n")
    docs = corpus.shakespeare_documents(text, speeches_per_document=2)
    assert docs == [["Before we proceed any further, hear me speak.", "Speak, speak."],
                    ["You are all resolved rather to die than to famish?", "Resolved!", "Is't a verdict?"]]
