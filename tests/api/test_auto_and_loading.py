"""AutoConfig / AutoTokenizer / AutoModel* for BERT checkpoints, the loading keywords tutorials pass
(hub-only ones accepted, from_tf honoured), hub names that are not directories, SchedulerType
(issue 28)."""
import json
import os
import shutil
import warnings

import numpy as np
import pytest

import npbert
from npbert import optim
from npbert.io import CheckpointError

KW = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
          max_position_embeddings=16)
GOOGLE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "io", "fixtures", "google")
HUB = dict(cache_dir="/nonexistent/cache", force_download=False, local_files_only=True, revision="main",
           proxies=None, token=None, trust_remote_code=False)

AUTO = {"AutoModel": "BertModel", "AutoModelForPreTraining": "BertForPreTraining",
        "AutoModelForMaskedLM": "BertForMaskedLM", "AutoModelForCausalLM": "BertLMHeadModel",
        "AutoModelForNextSentencePrediction": "BertForNextSentencePrediction",
        "AutoModelForSequenceClassification": "BertForSequenceClassification",
        "AutoModelForTokenClassification": "BertForTokenClassification",
        "AutoModelForMultipleChoice": "BertForMultipleChoice", "AutoModelForQuestionAnswering": "BertForQuestionAnswering"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("bert"))
    npbert.BertForPreTraining(npbert.BertConfig(**KW)).save_pretrained(directory)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]) + "\n")
    return directory


@pytest.mark.parametrize("auto,cls", sorted(AUTO.items()))
def test_auto_model_classes_load_the_bert_class(saved, auto, cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # unused / fresh head weights, BertLMHeadModel's is_decoder
        model = getattr(npbert, auto).from_pretrained(saved, **HUB)
        fresh = getattr(npbert, auto).from_config(npbert.BertConfig(**KW))
    assert type(model).__name__ == cls and type(fresh).__name__ == cls
    direct = getattr(npbert, cls).from_pretrained(saved) if cls != "BertLMHeadModel" else None
    if direct is not None:
        for (n, p), q in zip(model.named_parameters(), direct.parameters()):
            if not n.startswith(("cls.", "classifier.", "qa_outputs.")):     # heads missing from the checkpoint are fresh
                assert np.array_equal(p, q), n
    with pytest.raises(OSError, match="designed to be instantiated"):
        getattr(npbert, auto)()


def test_auto_config_and_tokenizer(saved):
    config = npbert.AutoConfig.from_pretrained(saved, num_labels=5, **HUB)
    assert isinstance(config, npbert.BertConfig) and config.num_labels == 5
    assert npbert.AutoConfig.for_model("bert", hidden_size=8).hidden_size == 8
    tok = npbert.AutoTokenizer.from_pretrained(saved, use_fast=True, do_lower_case=True, **HUB)
    assert isinstance(tok, npbert.BertTokenizer) and tok.convert_tokens_to_ids("w3") == 8


def test_another_model_type_is_named(saved, tmp_path):
    other = str(tmp_path / "gpt2")
    shutil.copytree(saved, other)
    config_file = os.path.join(other, "config.json")
    with open(config_file) as f:
        stored = json.load(f)
    stored["model_type"] = "gpt2"
    with open(config_file, "w") as f:
        json.dump(stored, f)
    for auto in ("AutoModel", "AutoModelForCausalLM", "AutoConfig"):
        with pytest.raises(ValueError, match=r"config.json: model_type is 'gpt2'; npbert implements BERT only"):
            getattr(npbert, auto).from_pretrained(other)
    with pytest.raises(ValueError, match="model_type is 'gpt2' and no tokenizer_class"):
        npbert.AutoTokenizer.from_pretrained(other)
    stored["tokenizer_class"] = "BertTokenizer"          # seed 002's GPT-2 with a BERT tokenizer: allowed
    with open(config_file, "w") as f:
        json.dump(stored, f)
    assert isinstance(npbert.AutoTokenizer.from_pretrained(other), npbert.BertTokenizer)
    with open(os.path.join(other, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer"}, f)
    with pytest.raises(ValueError, match="tokenizer_class is 'GPT2Tokenizer'"):
        npbert.AutoTokenizer.from_pretrained(other)
    with pytest.raises(ValueError, match="model_type is 'roberta'"):
        npbert.AutoConfig.for_model("roberta")


@pytest.mark.parametrize("call", ["BertModel.from_pretrained", "AutoModel.from_pretrained",
                                  "BertConfig.from_pretrained", "AutoTokenizer.from_pretrained"])
def test_a_hub_name_is_a_clear_error(call):
    owner, method = call.split(".")
    with pytest.raises((OSError, ValueError), match=r"'bert-base-uncased' is not a directory.*never downloads.*"
                                                    r"from_pretrained\('bert-base-uncased'\)\.save_pretrained"):
        getattr(getattr(npbert, owner), method)("bert-base-uncased", cache_dir="/tmp")


def test_from_tf_reads_the_tensorflow_checkpoint(saved, tmp_path):
    """A directory holding both a model.safetensors and Google's bert_model.ckpt: from_tf=True reads
    the checkpoint (seed 004: from_tf=bool(".ckpt" in path)), as the checkpoint alone gives."""
    both = str(tmp_path / "both")
    shutil.copytree(GOOGLE, both)
    alone = npbert.BertForPreTraining.from_pretrained(GOOGLE)
    zeros = npbert.BertForPreTraining(alone.config)
    for p in zeros.parameters():
        p[...] = 0
    zeros.save_pretrained(str(tmp_path / "z"))
    shutil.copy(str(tmp_path / "z" / "model.safetensors"), both)
    assert not any(npbert.BertForPreTraining.from_pretrained(both).bert.pooler.dense.weight.ravel())
    tf = npbert.BertForPreTraining.from_pretrained(both, from_tf=True, cache_dir=None)
    prefix = npbert.BertForPreTraining.from_pretrained(os.path.join(both, "bert_model.ckpt"),
                                                       from_tf=bool(".ckpt" in "bert_model.ckpt"))
    for (n, p), q, r in zip(alone.named_parameters(), tf.parameters(), prefix.parameters()):
        assert np.array_equal(p, q) and np.array_equal(p, r), n
    with pytest.raises(CheckpointError, match=r"no TensorFlow weights file found.*from_tf=True"):
        npbert.BertForPreTraining.from_pretrained(saved, from_tf=True)
    with pytest.raises(CheckpointError, match="not a TensorFlow checkpoint"):
        npbert.BertForPreTraining.from_pretrained(os.path.join(saved, "model.safetensors"), from_tf=True)
    with pytest.raises(TypeError, match="unknown keyword"):
        npbert.BertForPreTraining.from_pretrained(saved, cache_directory="/tmp")     # a typo is still an error


def test_output_loading_info(saved):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, info = npbert.BertForSequenceClassification.from_pretrained(saved, output_loading_info=True)
    assert info["missing_keys"] == ["classifier.weight", "classifier.bias"]
    assert "cls.predictions.bias" in info["unexpected_keys"]


def test_scheduler_type_is_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.trainer_utils import SchedulerType as Theirs
    assert [(m.name, m.value) for m in optim.SchedulerType] == [(m.name, m.value) for m in Theirs]
    assert npbert.SchedulerType is optim.SchedulerType
    from transformers.optimization import TYPE_TO_SCHEDULER_FUNCTION as theirs
    ours = optim.TYPE_TO_SCHEDULER_FUNCTION
    assert {k.value: f.__name__ for k, f in ours.items()} == \
        {k.value: f.__name__ for k, f in theirs.items() if k.value in {m.value for m in ours}}
    opt = optim.AdamW([("w", np.zeros(1))], lr=1.0)
    sched = optim.get_scheduler(optim.SchedulerType.COSINE, opt, num_warmup_steps=2, num_training_steps=8)
    assert sched.get_last_lr() == [0.0]
    with pytest.raises(ValueError, match="not a valid SchedulerType"):
        optim.SchedulerType("cosine_restarts")
    for name in ("AdamW", "get_scheduler", "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup"):
        assert getattr(npbert, name) is getattr(optim, name)


def test_loading_warnings_name_the_callers_line(saved):
    """A loading warning points at the user's line, also through an Auto class (npbert's own
    frames are skipped), so that a reader sees which call loaded the fresh head."""
    for load in (npbert.BertForSequenceClassification.from_pretrained,
                 npbert.AutoModelForSequenceClassification.from_pretrained):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load(saved, num_labels=2)
        fresh = [w for w in caught if "newly initialized" in str(w.message)]
        assert len(fresh) == 1 and fresh[0].filename == __file__, [(w.filename, str(w.message)[:60]) for w in caught]
