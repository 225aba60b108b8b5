"""Instance files (.h5) round trip; bad input of the data commands gives a clear error."""
import random

import h5py
import numpy as np
import pytest

from npbert.cli import main
from npbert.data.features import PretrainingDataset, read_features, write_instances_to_h5
from npbert.data.pretraining import create_training_instances
from npbert.tokenization import BertTokenizer


def test_h5_round_trip(small_corpus, tmp_path):
    docs, vocab = small_corpus
    tok = BertTokenizer(vocab)
    instances = create_training_instances([docs], tok, 40, 1, 0.1, 0.15, 6, random.Random(1))
    path = write_instances_to_h5(instances, tok.vocab, 40, 6, str(tmp_path / "i.h5"))
    ds = PretrainingDataset(path)
    assert len(ds) == len(instances)
    for n in (0, len(ds) // 2, len(ds) - 1):
        inst, ex = instances[n], ds[n]
        L = len(inst.tokens)
        assert tok.convert_ids_to_tokens(ex["input_ids"][:L].tolist()) == inst.tokens
        assert ex["input_ids"][L:].tolist() == [0] * (40 - L)
        assert ex["attention_mask"].tolist() == [1] * L + [0] * (40 - L)
        assert ex["token_type_ids"][:L].tolist() == inst.segment_ids
        where = np.flatnonzero(ex["labels"] != -100).tolist()
        assert where == inst.masked_lm_positions
        assert tok.convert_ids_to_tokens(ex["labels"][where].tolist()) == inst.masked_lm_labels
        assert int(ex["next_sentence_label"]) == int(inst.is_random_next)
    dyn = PretrainingDataset(path, static_masks=False)           # originals back at the masked positions
    inst = instances[0]
    original = list(inst.tokens)
    for p, lab in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        original[p] = lab
    assert tok.convert_ids_to_tokens(dyn[0]["input_ids"].tolist()) == original and "labels" not in dyn[0]


def test_corrupt_instance_files(small_corpus, tmp_path):
    docs, vocab = small_corpus
    tok = BertTokenizer(vocab)
    instances = create_training_instances([docs], tok, 32, 1, 0.1, 0.15, 5, random.Random(1))
    good = write_instances_to_h5(instances, tok.vocab, 32, 5, str(tmp_path / "good.h5"))
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"this is not hdf5" * 10)
    with pytest.raises(ValueError, match="not a readable HDF5"):
        read_features(str(junk))
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(open(good, "rb").read()[:3000])
    with pytest.raises(ValueError, match="truncated.h5"):
        read_features(str(truncated))
    missing = str(tmp_path / "missing.h5")
    with h5py.File(good, "r") as src, h5py.File(missing, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for k in src:
            if k != "masked_lm_ids":
                dst.create_dataset(k, data=src[k][()])
    with pytest.raises(ValueError, match="'masked_lm_ids' is missing"):
        read_features(missing)
    out_of_range = str(tmp_path / "range.h5")
    with h5py.File(good, "r") as src, h5py.File(out_of_range, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for k in src:
            a = src[k][()]
            if k == "input_ids":
                a[0, 1] = 10 ** 6
            dst.create_dataset(k, data=a)
    with pytest.raises(ValueError, match=r"input_ids\[\(0, 1\)\] = 1000000 is outside the vocabulary"):
        read_features(out_of_range)


def run_cli(argv, capsys):
    status = main(argv)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("content,message", [
    (b"", "no text"),
    (b"\n\n   \n", "no text"),
    (b"\x00\x01\x02binary\x00", "binary file"),
    (b"caf\xe9 au lait\n", "not UTF-8"),
    (b"One sentence.\nAnother sentence.\n", "one document only"),
])
def test_bad_corpus(small_corpus, tmp_path, capsys, content, message):
    _, vocab = small_corpus
    bad = tmp_path / "corpus.txt"
    bad.write_bytes(content)
    status, err = run_cli(["create-pretraining-data", f"--input_file={bad}", f"--output_file={tmp_path}/o.h5",
                           f"--vocab_file={vocab}"], capsys)
    assert status == 1 and message in err and "Traceback" not in err


def test_bad_settings(small_corpus, tmp_path, capsys):
    docs, vocab = small_corpus
    no_mask = tmp_path / "vocab_no_mask.txt"
    no_mask.write_text("".join(t for t in open(vocab) if t.strip() != "[MASK]"))
    status, err = run_cli(["create-pretraining-data", f"--input_file={docs}", f"--output_file={tmp_path}/o.h5",
                           f"--vocab_file={no_mask}"], capsys)
    assert status == 1 and "[MASK]" in err
    config = tmp_path / "config.json"
    config.write_text('{"vocab_size": 400, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, '
                      '"intermediate_size": 64, "max_position_embeddings": 64}')
    status, err = run_cli(["pretrain", f"--input_file={docs}", f"--vocab_file={vocab}", f"--config={config}",
                           f"--output_dir={tmp_path}/out", "--max_seq_length=128", "--max_steps=1"], capsys)
    assert status == 1 and "max_position_embeddings" in err
    status, err = run_cli(["pretrain", f"--instances_file={docs}", f"--vocab_file={vocab}",
                           f"--output_dir={tmp_path}/out", "--max_steps=1"], capsys)
    assert status == 1 and "not a readable HDF5" in err
    status, err = run_cli(["build-vocab", f"--input_file={docs}", "--vocab_size=3",
                           f"--output={tmp_path}/v.txt"], capsys)
    assert status == 1 and "vocab_size=3" in err
