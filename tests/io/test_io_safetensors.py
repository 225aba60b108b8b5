"""safetensors reader/writer: exact round trips with the reference library,
zero-copy memory mapping, full header validation, atomic writes, fuzzing."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npbert.io import CheckpointError, detect_format, read_state_dict, write_safetensors
from npbert.io import _atomic
from npbert.io.safetensors import read_safetensors, read_safetensors_header, read_safetensors_metadata

from io_helpers import assert_same_tensors

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32,
          np.int64, np.uint16, np.uint32, np.uint64, np.bool_]


def sample_tensors():
    rng = np.random.default_rng(0)
    out = {}
    for i, dt in enumerate(DTYPES):
        x = rng.normal(size=(3, i + 1)) * 50
        out[f"t{i}.{np.dtype(dt).name}"] = x.astype(dt)
    out["scalar"] = np.array(3.5, dtype=np.float32)
    out["empty"] = np.zeros((0, 4), dtype=np.float32)
    out["fortran"] = np.asfortranarray(rng.normal(size=(4, 5)).astype(np.float32))
    return out


def build(header, data, pad=0):
    blob = json.dumps(header).encode() + b" " * pad
    return len(blob).to_bytes(8, "little") + blob + data


def test_reference_library_reads_what_we_write(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = sample_tensors()
    write_safetensors(tmp_path / "m.safetensors", tensors, metadata={"format": "pt", "k": "v"})
    assert_same_tensors(safetensors_numpy.load_file(tmp_path / "m.safetensors"), tensors)
    assert read_safetensors_metadata(tmp_path / "m.safetensors") == {"format": "pt", "k": "v"}


def test_we_read_what_the_reference_library_writes(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = sample_tensors()
    del tensors["fortran"]   # the reference numpy writer dumps its raw (F-order) buffer
    safetensors_numpy.save_file(tensors, tmp_path / "model.safetensors")
    got = read_state_dict(tmp_path / "model.safetensors")
    assert_same_tensors(got, tensors)
    assert detect_format(tmp_path / "model.safetensors") == "safetensors"
    assert detect_format(tmp_path) == "safetensors"


def test_default_metadata_is_format_pt(tmp_path):
    write_safetensors(tmp_path / "m.safetensors", {"a": np.ones(2, np.float32)})
    assert read_safetensors_metadata(tmp_path / "m.safetensors") == {"format": "pt"}


def test_bf16_is_widened_exactly_to_float32(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    x = torch.randn(5, 7).to(torch.bfloat16)
    safetensors_torch.save_file({"x": x}, tmp_path / "b.safetensors")
    got = read_safetensors(tmp_path / "b.safetensors")["x"]
    assert got.dtype == np.float32
    assert np.array_equal(got, x.float().numpy())   # bf16 -> f32 is exact


def test_arrays_are_read_only_views_of_a_memory_map(tmp_path):
    write_safetensors(tmp_path / "m.safetensors", {"w": np.ones((64, 64), np.float32)})
    w = read_safetensors(tmp_path / "m.safetensors")["w"]
    assert not w.flags.writeable
    base = w
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    import mmap
    assert isinstance(base, mmap.mmap)


def test_write_is_atomic_old_file_survives_a_failed_save(tmp_path, monkeypatch):
    target = tmp_path / "m.safetensors"
    write_safetensors(target, {"old": np.ones(3, np.float32)})

    def exploding_replace(src, dst):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(_atomic.os, "replace", exploding_replace)
    with pytest.raises(KeyboardInterrupt):
        write_safetensors(target, {"new": np.zeros(3, np.float32)})
    monkeypatch.undo()
    assert list(read_safetensors(target)) == ["old"]
    assert os.listdir(tmp_path) == ["m.safetensors"]      # no temp file left behind


def test_unwritable_dtype_raises_before_touching_the_file(tmp_path):
    target = tmp_path / "m.safetensors"
    write_safetensors(target, {"old": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match="'bad'"):
        write_safetensors(target, {"a": np.ones(2), "bad": np.array(["x"], dtype=object)})
    assert list(read_safetensors(target)) == ["old"]


GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}}


@pytest.mark.parametrize("header, data, message", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 80]}}, bytes(8), "'a'.*past the end"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12), "'b'.*overlap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(8), "overlap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12), "'a'.*gap"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8), "'a'.*needs 12 bytes"),
    ({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, bytes(8), "'a'.*unknown dtype"),
    ({"a": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}}, bytes(8), "'a'.*F8_E4M3"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8), "'a'.*shape"),
    ({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, bytes(8), "'a'.*shape"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, bytes(8), "'a'.*end before"),
    ({"a": {"dtype": "F32", "shape": [2]}}, bytes(8), "'a'.*exactly"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(9), "trailing"),
    ({"__metadata__": {"format": 1}}, b"", "__metadata__"),
    ([1, 2], b"", "'\\{'"),
])
def test_inconsistent_headers_are_refused_by_name(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(build(header, data))
    with pytest.raises(CheckpointError, match=message) as info:
        read_safetensors(path)
    assert str(path) in str(info.value)


def test_duplicate_keys_are_refused(tmp_path):
    blob = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},' \
           b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    path = tmp_path / "dup.safetensors"
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + bytes(4))
    with pytest.raises(CheckpointError, match="duplicate key 'a'"):
        read_safetensors(path)


@pytest.mark.parametrize("raw, message", [
    (b"", "shorter than"),
    (b"\x10\x00", "shorter than"),
    ((1000).to_bytes(8, "little") + b"{}", "past the end"),
    ((2 ** 63).to_bytes(8, "little") + b"{}", "exceeds"),
    ((4).to_bytes(8, "little") + b"\xff\xfe{}", "UTF-8"),
    ((4).to_bytes(8, "little") + b"{\"a\"", "not valid JSON"),
])
def test_truncated_and_garbage_files(tmp_path, raw, message):
    path = tmp_path / "x.safetensors"
    path.write_bytes(raw)
    with pytest.raises(CheckpointError, match=message):
        read_safetensors(path)


def test_truncated_valid_file_names_the_tensor(tmp_path):
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"w": np.ones((10, 10), np.float32)})
    raw = path.read_bytes()
    path.write_bytes(raw[:-7])
    with pytest.raises(CheckpointError, match="'w'"):
        read_safetensors(path)


def test_padded_header_is_accepted(tmp_path):
    path = tmp_path / "p.safetensors"
    path.write_bytes(build(GOOD, np.array([1, 2], np.float32).tobytes()
                           + np.array([7], np.int64).tobytes(), pad=5))
    got = read_safetensors(path)
    assert got["a"].tolist() == [1.0, 2.0] and got["b"].tolist() == [7]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_corrupted_files_raise_checkpoint_error_or_load_consistently(tmp_path, data):
    clean = tmp_path / "clean.safetensors"
    if not clean.exists():
        write_safetensors(clean, {"emb": np.arange(24, dtype=np.float32).reshape(4, 6),
                                  "ids": np.arange(5, dtype=np.int64),
                                  "half": np.ones(3, np.float16)})
    raw = bytearray(clean.read_bytes())
    kind = data.draw(st.sampled_from(["flip", "truncate", "both"]))
    if kind in ("flip", "both"):
        for _ in range(data.draw(st.integers(1, 8))):
            # Bias towards the header, where structure lives.
            pos = data.draw(st.integers(0, min(len(raw) - 1, data.draw(st.sampled_from([40, 300, len(raw) - 1])))))
            raw[pos] = data.draw(st.integers(0, 255))
    if kind in ("truncate", "both"):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(bytes(raw))
    try:
        got = read_safetensors(path)
    except CheckpointError:
        return
    # Loaded: each array holds exactly its header byte range, and the
    # ranges tile the data section.
    header_len, entries, _ = read_safetensors_header(path)
    assert sorted(got) == sorted(e[0] for e in entries)
    for name, dtype, shape, begin, end in entries:
        assert got[name].shape == shape
        assert got[name].nbytes == (end - begin) * (2 if dtype == "BF16" else 1)
    assert sum(e[4] - e[3] for e in entries) == len(raw) - 8 - header_len
