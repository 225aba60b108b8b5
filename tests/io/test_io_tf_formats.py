"""Google's bert_model.ckpt and transformers' tf_model.h5, read without
TensorFlow from fixtures TF wrote (tests/io/fixtures/make_tf_fixtures.py).

The fixtures hold one tiny BertForPreTraining saved both ways; expected.npz
holds every array as TF stored it and the TF model's outputs, and
keras_to_pt.json transformers' own Keras->PyTorch name conversion."""
import json
import os
import shutil

import numpy as np
import pytest

from npbert.io import CheckpointError, detect_format, match_state_dict, read_state_dict
from npbert.io.keras_h5 import read_keras_h5_raw
from npbert.io.names import keras_to_hf
from npbert.io.tf_checkpoint import crc32c, read_bert_config, read_tf_checkpoint_raw

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
GOOGLE = os.path.join(FIXTURES, "google")
KERAS = os.path.join(FIXTURES, "tf_model_h5")


@pytest.fixture(scope="module")
def expected():
    with np.load(os.path.join(FIXTURES, "expected.npz")) as z:
        return {k: z[k] for k in z.files}


def prefixed(expected, prefix):
    return {k[len(prefix):]: v for k, v in expected.items() if k.startswith(prefix)}


def test_crc32c_known_vector():
    assert crc32c(b"123456789") == 0xE3069283   # the standard CRC-32C check value


def test_google_raw_tensors_are_bit_identical_incl_optimizer_slots(expected):
    raw = read_tf_checkpoint_raw(os.path.join(GOOGLE, "bert_model.ckpt"))
    want = prefixed(expected, "google/")
    assert sorted(raw) == sorted(want)
    assert any(k.endswith("/adam_m") for k in raw) and "global_step" in raw
    for k in want:
        assert raw[k].dtype == want[k].dtype and np.array_equal(raw[k], want[k]), k


def test_keras_raw_tensors_are_bit_identical(expected):
    raw = read_keras_h5_raw(os.path.join(KERAS, "tf_model.h5"))
    want = prefixed(expected, "keras/")
    assert sorted(raw) == sorted(want)
    for k in want:
        assert np.array_equal(raw[k], want[k]), k


def test_keras_names_follow_transformers_own_conversion():
    with open(os.path.join(FIXTURES, "keras_to_pt.json")) as f:
        reference = json.load(f)
    for tf_name, (pt_name, transpose) in reference.items():
        assert keras_to_hf(tf_name) == (pt_name, transpose), tf_name


def test_both_tf_formats_give_the_same_state_dict_with_kernels_transposed(expected):
    google = read_state_dict(GOOGLE)
    keras = read_state_dict(KERAS)
    assert sorted(google) == sorted(keras)
    for k in google:
        assert np.array_equal(google[k], keras[k]), k
    # kernels are (out, in) now: the intermediate dense maps hidden 8 -> 16
    assert google["bert.encoder.layer.0.intermediate.dense.weight"].shape == (16, 8)
    raw = prefixed(expected, "google/")
    assert np.array_equal(google["bert.encoder.layer.1.attention.self.query.weight"],
                          raw["bert/encoder/layer_1/attention/self/query/kernel"].T)
    assert np.array_equal(google["cls.seq_relationship.weight"],
                          raw["cls/seq_relationship/output_weights"])   # not transposed
    assert np.array_equal(google["cls.predictions.bias"], raw["cls/predictions/output_bias"])
    assert not any("adam" in k or "global_step" in k for k in google)


def test_detect_format_and_prefix_paths():
    assert detect_format(GOOGLE) == "tf-checkpoint"
    assert detect_format(os.path.join(GOOGLE, "bert_model.ckpt")) == "tf-checkpoint"
    assert detect_format(os.path.join(GOOGLE, "bert_model.ckpt.index")) == "tf-checkpoint"
    assert detect_format(KERAS) == "keras-h5"
    assert read_bert_config(os.path.join(GOOGLE, "bert_model.ckpt"))["hidden_size"] == 8


def test_tf_weights_in_transformers_reproduce_tf_outputs(expected):
    """The end-to-end check of names and transposes: transformers' PyTorch
    BertForPreTraining with the weights we read gives TF's outputs."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig.from_json_file(os.path.join(KERAS, "config.json"))
    for source in (GOOGLE, KERAS):
        model = transformers.BertForPreTraining(config).eval()
        m = match_state_dict(read_state_dict(source),
                             {k: tuple(p.shape) for k, p in model.named_parameters()})
        assert m.missing == [] and m.unexpected == [] and m.mismatched == []
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in m.state_dict.items()},
                              strict=False)
        with torch.no_grad():
            out = model(input_ids=torch.tensor(expected["inputs/input_ids"]).long(),
                        attention_mask=torch.tensor(expected["inputs/attention_mask"]).long(),
                        token_type_ids=torch.tensor(expected["inputs/token_type_ids"]).long(),
                        output_hidden_states=True)
        # float32 TF vs torch kernels: a few ulp of accumulated round-off.
        np.testing.assert_allclose(out.hidden_states[-1].numpy(),
                                   expected["outputs/last_hidden_state"], rtol=0, atol=1e-5)
        np.testing.assert_allclose(out.prediction_logits.numpy(),
                                   expected["outputs/prediction_logits"], rtol=0, atol=1e-5)
        np.testing.assert_allclose(out.seq_relationship_logits.numpy(),
                                   expected["outputs/seq_relationship_logits"], rtol=0, atol=1e-5)


# --- broken TF checkpoints -------------------------------------------------------

@pytest.fixture
def google_copy(tmp_path):
    for name in os.listdir(GOOGLE):
        shutil.copy(os.path.join(GOOGLE, name), tmp_path)
    return tmp_path


def test_truncated_index_and_data(google_copy):
    index = google_copy / "bert_model.ckpt.index"
    data = google_copy / "bert_model.ckpt.data-00000-of-00001"
    raw_index, raw_data = index.read_bytes(), data.read_bytes()
    for cut in (0, 10, len(raw_index) // 2, len(raw_index) - 1):
        index.write_bytes(raw_index[:cut])
        with pytest.raises(CheckpointError, match="bert_model.ckpt.index"):
            read_state_dict(google_copy)
    index.write_bytes(raw_index)
    data.write_bytes(raw_data[: len(raw_data) // 2])
    with pytest.raises(CheckpointError, match="run past the end of .*data-00000-of-00001"):
        read_state_dict(google_copy)
    data.unlink()
    with pytest.raises(CheckpointError, match="cannot open data file"):
        read_state_dict(google_copy)


def test_every_corrupted_index_byte_is_detected_or_harmless(google_copy):
    """The index blocks carry CRC32C: flipping a byte of the file (every 7th,
    and all of the footer) must give a CheckpointError (or, in the footer's
    padding, change nothing)."""
    index = google_copy / "bert_model.ckpt.index"
    raw = index.read_bytes()
    reference = read_tf_checkpoint_raw(google_copy / "bert_model.ckpt")
    positions = sorted(set(range(0, len(raw), 7)) | set(range(len(raw) - 48, len(raw))))
    for pos in positions:
        corrupted = bytearray(raw)
        corrupted[pos] ^= 0x5A
        index.write_bytes(bytes(corrupted))
        try:
            got = read_tf_checkpoint_raw(google_copy / "bert_model.ckpt")
        except CheckpointError:
            continue
        assert sorted(got) == sorted(reference), pos
        for k in got:
            assert np.array_equal(got[k], reference[k]), (pos, k)


def test_snappy_block_is_refused_clearly(google_copy):
    from npbert.io import tf_checkpoint
    index = google_copy / "bert_model.ckpt.index"
    raw = bytearray(index.read_bytes())
    # The first data block starts at 0; find its trailer through the index
    # handle and mark it snappy (type byte 1), fixing up nothing else.
    footer = raw[-48:]
    pos = 0
    _, pos = tf_checkpoint.read_varint(footer, pos)
    _, pos = tf_checkpoint.read_varint(footer, pos)
    index_offset, pos = tf_checkpoint.read_varint(footer, pos)
    index_size, _ = tf_checkpoint.read_varint(footer, pos)
    block = bytes(raw[index_offset:index_offset + index_size])
    (_, handle), = list(tf_checkpoint._block_entries(block, "index"))[:1]
    offset, p = tf_checkpoint.read_varint(handle, 0)
    size, _ = tf_checkpoint.read_varint(handle, p)
    raw[offset + size] = 1
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="snappy"):
        read_state_dict(google_copy)


def test_keras_h5_broken(tmp_path):
    h5py = pytest.importorskip("h5py")
    p = tmp_path / "tf_model.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.ones(3))
    with pytest.raises(CheckpointError, match="layer_names"):
        read_state_dict(p)
    raw = open(os.path.join(KERAS, "tf_model.h5"), "rb").read()
    p.write_bytes(raw[: len(raw) // 3])
    with pytest.raises(CheckpointError):
        read_state_dict(p)
