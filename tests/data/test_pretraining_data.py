"""npbert.data.create_training_instances against google-research/bert's create_pretraining_data.py
(bert-tensorflow 1.0.4, run without TensorFlow through tests/google_reference.py): the same
instances, field by field, in the same order, for the same files, vocabulary, arguments and seed."""
import os
import random

import numpy as np
import pytest

import npbert
from npbert.data import create_pretraining_data as pretraining, features, shakespeare
from npbert.data.vocab import build_vocab

CORPUS = os.path.join(os.path.dirname(npbert.__file__), "data", "corpus")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pretraining")
    vocab = build_vocab([os.path.join(CORPUS, "tinyshakespeare.txt")], 1200, str(d / "vocab.txt"))
    assert len(vocab) == 1200
    docs = shakespeare.documents(shakespeare.read_speeches()[:400], speeches_per_document=6)
    shakespeare.write_documents(docs, str(d / "shakespeare.txt"))
    return {"vocab": str(d / "vocab.txt"), "sample": os.path.join(CORPUS, "sample_text.txt"),
            "shakespeare": str(d / "shakespeare.txt")}


def google_instances(cpd, tokenization, input_file, vocab, **kw):
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=True)
    rng = random.Random(kw.pop("seed"))
    return cpd.create_training_instances([input_file], tokenizer, rng=rng, **kw)


@pytest.mark.parametrize("corpus", ["sample", "shakespeare"])
@pytest.mark.parametrize("seed,max_seq_length,dupe_factor,short_seq_prob,masked_lm_prob,max_predictions", [
    (12345, 128, 2, 0.1, 0.15, 20), (0, 32, 3, 0.5, 0.2, 5), (7, 64, 1, 0.0, 0.15, 10), (3, 8, 1, 0.9, 0.3, 3)])
def test_instances_equal_googles(files, corpus, seed, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
                                 max_predictions):
    import google_reference
    cpd = google_reference.load("create_pretraining_data")
    tokenization = google_reference.load("tokenization")
    kw = dict(max_seq_length=max_seq_length, dupe_factor=dupe_factor, short_seq_prob=short_seq_prob,
              masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions)
    theirs = google_instances(cpd, tokenization, files[corpus], files["vocab"], seed=seed, **kw)
    tok = npbert.BertTokenizer(files["vocab"])
    ours = pretraining.create_training_instances([files[corpus]], tok, rng=random.Random(seed), **kw)
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert a.tokens == b.tokens
        assert a.segment_ids == b.segment_ids
        assert a.is_random_next == b.is_random_next
        assert a.masked_lm_positions == b.masked_lm_positions
        assert a.masked_lm_labels == b.masked_lm_labels
    if max_seq_length >= 32:     # (with 5 tokens a chunk is one sentence: B is always random)
        assert len({i.is_random_next for i in ours}) == 2    # both NSP classes occur


def test_whole_word_masking_masks_whole_words(files):
    tok = npbert.BertTokenizer(files["vocab"])
    insts = pretraining.create_training_instances([files["shakespeare"]], tok, 64, 2, 0.1, 0.15, 10,
                                                  random.Random(1), do_whole_word_mask=True)
    pieces_seen = 0
    for inst in insts:
        chosen = set(inst.masked_lm_positions)
        assert len(chosen) <= min(10, max(1, round(len(inst.tokens) * 0.15)))
        originals = dict(zip(inst.masked_lm_positions, inst.masked_lm_labels))
        previous = None                          # the last token that is not [CLS]/[SEP]
        for i, t in enumerate(inst.tokens):
            if t in ("[CLS]", "[SEP]"):
                continue
            if originals.get(i, t).startswith("##") and previous is not None:
                pieces_seen += 1
                # a ## piece is chosen exactly when the token before it is (as Google's script,
                # "before" skips [SEP]: a segment B cut at the front may start with a piece)
                assert (i in chosen) == (previous in chosen), (inst.tokens, i)
            previous = i
    assert pieces_seen > 50


def test_features_round_trip_and_dataset(files, tmp_path):
    tok = npbert.BertTokenizer(files["vocab"])
    insts = pretraining.create_training_instances([files["sample"]], tok, 64, 1, 0.1, 0.15, 10, random.Random(0))
    feats = features.instances_to_features(insts, tok, 64, 10)
    path = str(tmp_path / "inst.h5")
    features.write_features(path, feats, len(tok), 64, 10)
    ds = features.PretrainingDataset(path)
    assert len(ds) == len(insts)
    for k in (0, len(ds) - 1):
        ex, inst = ds[k], insts[k]
        n = len(inst.tokens)
        assert ex["input_ids"][:n].tolist() == tok.convert_tokens_to_ids(inst.tokens)
        assert ex["attention_mask"].sum() == n and ex["token_type_ids"][:n].tolist() == inst.segment_ids
        predicted = np.flatnonzero(ex["labels"] != -100).tolist()
        assert predicted == inst.masked_lm_positions
        assert ex["labels"][predicted].tolist() == tok.convert_tokens_to_ids(inst.masked_lm_labels)
        assert ex["next_sentence_label"] == int(inst.is_random_next)
    model = npbert.BertForPreTraining(npbert.BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                                                        num_attention_heads=2, intermediate_size=32,
                                                        max_position_embeddings=64))
    from npbert.training import default_data_collator
    out = model(**default_data_collator([ds[0], ds[1]]))
    assert np.isfinite(out.loss)


def test_bad_input_is_a_clear_error(files, tmp_path):
    tok = npbert.BertTokenizer(files["vocab"])
    one = tmp_path / "one.txt"
    one.write_text("A single document.\nWith two sentences.\n")
    with pytest.raises(ValueError, match="1 document.*at least two"):
        pretraining.create_training_instances([str(one)], tok, 32, 1, 0.1, 0.15, 5, random.Random(0))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="0 document"):
        pretraining.create_training_instances([str(empty)], tok, 32, 1, 0.1, 0.15, 5, random.Random(0))
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage\n\n\xff\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        pretraining.create_training_instances([str(binary)], tok, 32, 1, 0.1, 0.15, 5, random.Random(0))
    with pytest.raises(ValueError, match="at least 5"):
        pretraining.create_training_instances([files["sample"]], tok, 4, 1, 0.1, 0.15, 5, random.Random(0))
    no_mask = tmp_path / "vocab.txt"
    no_mask.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n")
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        pretraining.create_training_instances([files["sample"]], npbert.BertTokenizer(str(no_mask), mask_token="[UNK]"),
                                              32, 1, 0.1, 0.15, 5, random.Random(0))
    corrupt = tmp_path / "bad.h5"
    corrupt.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="not an HDF5 file"):
        features.PretrainingDataset(str(corrupt))


def test_shakespeare_documents():
    speeches = shakespeare.read_speeches()
    assert len(speeches) > 7000
    assert speeches[0] == ["Before we proceed any further, hear me speak."]          # speaker names dropped
    docs = shakespeare.documents(speeches[:30], speeches_per_document=6)
    assert len(docs) == 5 and sum(len(d) for d in docs) == sum(len(s) for s in speeches[:30])
