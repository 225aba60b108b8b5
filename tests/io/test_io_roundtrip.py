"""Round trips: any format -> npbert .h5 / safetensors -> back, bit-identical;
our safetensors + config.json load in transformers with no missing or
unexpected keys and the same outputs; prefix and gamma/beta variants saved
by torch load into every class."""
import json
import os

import numpy as np
import pytest

from npbert.io import (CheckpointError, detect_format, match_state_dict, read_npbert_h5_config,
                       read_state_dict, write_npbert_h5, write_safetensors)
from npbert.io import _atomic

from io_helpers import (TINY, assert_same_tensors, expected_shapes, tiny_hf_model,
                       torch_state_dict_numpy)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_npbert_h5_round_trip_keeps_dtype_and_config(tmp_path, dtype):
    rng = np.random.default_rng(0)
    tensors = {"bert.encoder.layer.0.attention.self.query.weight": rng.normal(size=(8, 8)),
               "bert.embeddings.word_embeddings.weight": rng.normal(size=(40, 8)),
               "cls.predictions.bias": rng.normal(size=40),
               "bert.embeddings.position_ids": np.arange(5)[None]}
    tensors = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in tensors.items()}
    config = {"hidden_size": 8, "vocab_size": 40, "architectures": ["BertForPreTraining"]}
    write_npbert_h5(tmp_path / "model.h5", tensors, config)
    assert detect_format(tmp_path) == "npbert-h5"
    assert_same_tensors(read_state_dict(tmp_path), tensors)
    assert read_npbert_h5_config(tmp_path / "model.h5") == config


def test_npbert_h5_write_is_atomic_and_refuses_bad_names(tmp_path, monkeypatch):
    target = tmp_path / "model.h5"
    write_npbert_h5(target, {"a.b": np.ones(2, np.float32)}, {"v": 1})

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(_atomic.os, "replace", fail)
    with pytest.raises(OSError):
        write_npbert_h5(target, {"c.d": np.zeros(2, np.float32)}, {"v": 2})
    monkeypatch.undo()
    assert read_npbert_h5_config(target) == {"v": 1} and list(read_state_dict(target)) == ["a.b"]
    assert sorted(os.listdir(tmp_path)) == ["model.h5"]
    for bad in ("a/b", "", ".a", "a..b"):
        with pytest.raises(CheckpointError, match="HDF5 path"):
            write_npbert_h5(tmp_path / "x.h5", {bad: np.ones(1)}, {})


@pytest.mark.parametrize("source", ["google", "tf_model_h5"])
def test_tf_formats_to_npbert_h5_and_safetensors_round_trip(tmp_path, source):
    original = read_state_dict(os.path.join(FIXTURES, source))
    write_npbert_h5(tmp_path / "model.h5", original, {"hidden_size": 8})
    assert_same_tensors(read_state_dict(tmp_path / "model.h5"), original)
    write_safetensors(tmp_path / "model.safetensors", original)
    assert_same_tensors(read_state_dict(tmp_path / "model.safetensors"), original)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_bin_to_npbert_h5_round_trip(tmp_path, zip_format):
    torch = pytest.importorskip("torch")
    model = tiny_hf_model("BertForPreTraining")
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin",
               _use_new_zipfile_serialization=zip_format)
    sd = read_state_dict(tmp_path / "pytorch_model.bin")
    write_npbert_h5(tmp_path / "model.h5", sd, {})
    assert_same_tensors(read_state_dict(tmp_path / "model.h5"), torch_state_dict_numpy(model))


@pytest.mark.parametrize("class_name", ["BertModel", "BertForPreTraining", "BertForMaskedLM",
                                        "BertForSequenceClassification"])
def test_our_safetensors_load_in_transformers_with_same_outputs(tmp_path, class_name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = tiny_hf_model(class_name)
    params = {k: p.detach().numpy() for k, p in model.named_parameters()}  # tied weight once
    write_safetensors(tmp_path / "model.safetensors", params)
    model.config.to_json_file(tmp_path / "config.json")
    loaded, info = getattr(transformers, class_name).from_pretrained(tmp_path,
                                                                      output_loading_info=True)
    assert info["missing_keys"] in (set(), []) and info["unexpected_keys"] in (set(), [])
    assert info["mismatched_keys"] in (set(), [])
    loaded.eval()
    ids = torch.tensor([[2, 5, 7, 9, 3], [2, 11, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        a, b = model(input_ids=ids, attention_mask=mask), loaded(input_ids=ids, attention_mask=mask)
    for key in a.keys():
        assert torch.equal(a[key], b[key]), key      # same weights, same kernels: exact


@pytest.mark.parametrize("variant", ["with-prefix", "without-prefix", "gamma-beta", "position-ids"])
@pytest.mark.parametrize("target", ["BertModel", "BertForMaskedLM"])
def test_torch_saved_key_variants_match_every_class(tmp_path, variant, target):
    torch = pytest.importorskip("torch")
    source = tiny_hf_model("BertForPreTraining")
    sd = {k: v.clone() for k, v in source.state_dict().items()}
    if variant != "with-prefix":
        sd = {(k[len("bert."):] if k.startswith("bert.") else k): v for k, v in sd.items()}
    if variant == "gamma-beta":
        sd = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                       "LayerNorm.beta"): v
              for k, v in sd.items()}
    if variant == "position-ids":
        sd["bert.embeddings.position_ids"] = torch.arange(TINY["max_position_embeddings"])[None]
    torch.save(sd, tmp_path / "pytorch_model.bin")
    expected = expected_shapes(tiny_hf_model(target))
    m = match_state_dict(read_state_dict(tmp_path), expected)
    assert m.missing == [] and m.mismatched == []
    if target == "BertModel":      # the pre-training heads are not used
        assert m.unexpected and all(k.startswith("cls.") for k in m.unexpected)
    else:                          # BertForMaskedLM has no pooler and no NSP head
        unused = [k for k in sd if "pooler" in k or "seq_relationship" in k]
        assert len(unused) == 4 and sorted(m.unexpected) == sorted(unused)
    reference = torch_state_dict_numpy(source)
    for name, array in m.state_dict.items():
        src = name if name in reference else "bert." + name
        assert np.array_equal(array, reference[src]), name


def test_sharded_safetensors_index(tmp_path):
    a = {"x.a": np.ones((2, 2), np.float32)}
    b = {"x.b": np.arange(3, dtype=np.int64)}
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", a)
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", b)
    with open(tmp_path / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": {"x.a": "model-00001-of-00002.safetensors",
                                                  "x.b": "model-00002-of-00002.safetensors"}}, f)
    assert detect_format(tmp_path) == "safetensors-sharded"
    assert_same_tensors(read_state_dict(tmp_path), {**a, **b})
    with open(tmp_path / "model.safetensors.index.json", "w") as f:
        json.dump({"weight_map": {"x.a": "../../etc/passwd"}}, f)
    with pytest.raises(CheckpointError, match="plain file name"):
        read_state_dict(tmp_path)


def test_unknown_inputs(tmp_path):
    with pytest.raises(CheckpointError, match="no weights file"):
        read_state_dict(tmp_path)
    with pytest.raises(CheckpointError, match="no such file"):
        read_state_dict(tmp_path / "nope.bin")
    (tmp_path / "model.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 40)
    with pytest.raises(CheckpointError, match="HDF5"):
        read_state_dict(tmp_path)
