"""The pre-training commands end to end: build-vocab, create-pretraining-data, pretrain (with a
resume), fill-mask (against transformers' pipeline).  The demo: tests/data/test_demo.py."""
import json
import os

import numpy as np
import pytest

import npbert
from npbert.cli import main
from npbert.data import shakespeare


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    docs = shakespeare.documents(shakespeare.read_speeches()[:600], speeches_per_document=6)
    shakespeare.write_documents(docs, str(d / "train.txt"))
    shakespeare.write_documents(shakespeare.documents(shakespeare.read_speeches()[600:700], 6), str(d / "dev.txt"))
    assert main(["build-vocab", "--input_file", str(d / "train.txt"), "--vocab_size", "400",
                 "--output_file", str(d / "vocab.txt")]) == 0
    return d


def test_build_vocab_specials_first_and_pieces(corpus):
    vocab = (corpus / "vocab.txt").read_text().split("\n")[:-1]
    assert len(vocab) == 400 and vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocab)) == 400
    assert any(v.startswith("##") and len(v) > 3 for v in vocab)        # merged continuation pieces
    tok = npbert.BertTokenizer(str(corpus / "vocab.txt"))
    text = (corpus / "train.txt").read_text()[:3000]
    assert "[UNK]" not in tok.tokenize(text)                          # every character of the corpus is covered


def test_build_vocab_is_close_to_the_tokenizers_wordpiece_trainer(corpus):
    """The tokenizers library's WordPieceTrainer on the same words: the two vocabularies share at
    least 90 % of their tokens (they differ in tie-breaking between equally frequent pairs)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tk.train([str(corpus / "train.txt")], trainer)
    theirs = set(tk.get_vocab())
    ours = set((corpus / "vocab.txt").read_text().split("\n")[:-1])
    assert len(ours & theirs) >= 0.9 * len(theirs), sorted(theirs - ours)[:20]


def test_create_pretraining_data_writes_googles_features(corpus, tmp_path):
    out = tmp_path / "inst.h5"
    assert main(["create-pretraining-data", "--input_file", str(corpus / "train.txt"), "--output_file", str(out),
                 "--vocab_file", str(corpus / "vocab.txt"), "--max_seq_length", "32", "--max_predictions_per_seq", "5",
                 "--dupe_factor", "1"]) == 0
    from npbert.data import read_features
    feats, attrs = read_features(str(out))
    assert attrs == {"vocab_size": 400, "max_seq_length": 32, "max_predictions_per_seq": 5}
    assert feats["input_ids"].shape[1] == 32 and set(np.unique(feats["next_sentence_labels"])) == {0, 1}
    assert main(["create-pretraining-data", "--input_file", str(tmp_path / "nope.txt"), "--output_file", str(out),
                 "--vocab_file", str(corpus / "vocab.txt")]) == 2       # a missing input file: a usage error


def test_pretrain_resume_and_fill_mask(corpus, tmp_path, capsys):
    out = str(tmp_path / "run")
    common = ["pretrain", "--train_file", str(corpus / "train.txt"), "--validation_file", str(corpus / "dev.txt"),
              "--vocab_file", str(corpus / "vocab.txt"), "--output_dir", out, "--max_seq_length", "32",
              "--max_predictions_per_seq", "5", "--dupe_factor", "1", "--max_steps", "8",
              "--per_device_train_batch_size", "16", "--learning_rate", "1e-3", "--save_steps", "4",
              "--logging_steps", "2", "--eval_strategy", "steps", "--eval_steps", "4", "--plot", "false"]
    assert main(common) == 0
    state = json.load(open(os.path.join(out, "trainer_state.json")))
    assert state["global_step"] == 8 and any("eval_mlm_accuracy" in e for e in state["log_history"])
    assert os.path.exists(os.path.join(out, "vocab.txt")) and os.path.exists(os.path.join(out, "model.safetensors"))
    final = {n: p.copy() for n, p in npbert.BertForPreTraining.from_pretrained(out).named_parameters()}
    # resume from checkpoint-4 in a fresh output dir holding only it: the same final weights
    import shutil
    out2 = str(tmp_path / "run2")
    os.makedirs(out2)
    shutil.copytree(os.path.join(out, "checkpoint-4"), os.path.join(out2, "checkpoint-4"))
    assert main([a if a != out else out2 for a in common] + ["--resume_from_checkpoint"]) == 0
    resumed = npbert.BertForPreTraining.from_pretrained(out2)
    for n, p in resumed.named_parameters():
        assert np.array_equal(p, final[n]), n
    capsys.readouterr()
    assert main(["fill-mask", "--model", out, "--top_k", "3", "--json", "the [MASK] of the king"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result) == 3 and set(result[0]) == {"score", "token", "token_str", "sequence"}
    assert result[0]["score"] >= result[1]["score"] >= result[2]["score"]
    assert main(["fill-mask", "--model", out, "no mask here"]) == 1


def test_fill_mask_equals_transformers_pipeline(corpus, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from npbert.data.pretraining_eval import config_for_size
    tok = npbert.BertTokenizer(str(corpus / "vocab.txt"))
    model = npbert.BertForPreTraining(config_for_size("tiny", len(tok), max_position_embeddings=64), seed=1)
    rng = np.random.default_rng(0)
    for name, p in model.state.params.items():          # weights far from init, so the top k is not a tie
        p += rng.normal(0, 0.05, p.shape).astype(p.dtype)
    model.save_pretrained(str(tmp_path))
    tok.save_pretrained(str(tmp_path))
    pipe = transformers.pipeline("fill-mask", model=str(tmp_path), tokenizer=str(tmp_path), framework="pt") \
        if "framework" in transformers.pipeline.__code__.co_varnames else \
        transformers.pipeline("fill-mask", model=str(tmp_path), tokenizer=str(tmp_path))
    fill = npbert.pipeline("fill-mask", model=str(tmp_path))          # as transformers: a BertForMaskedLM of the directory
    for text in ("good [MASK], sweet prince", "what [MASK] through yonder window breaks"):
        ours, theirs = fill(text, top_k=4), pipe(text, top_k=4)
        assert [r["token"] for r in ours] == [r["token"] for r in theirs]
        assert [r["token_str"] for r in ours] == [r["token_str"] for r in theirs]
        assert [r["sequence"] for r in ours] == [r["sequence"] for r in theirs]
        # float32 logits on both sides, softmax in float64 here: 1e-5 relative
        np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], rtol=1e-5)
