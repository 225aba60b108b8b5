"""Bounded resources (a zip bomb built here, configs asking for terabytes, --max_seq_length) and
loads that notice (a config's layer count against the weights, non-finite weights, a config
field of the wrong type), each refused with the file and the field named."""
import io
import json
import os
import struct
import zipfile

import numpy as np
import pytest

import npbert
from npbert.cli import main
from npbert.config import check_max_seq_length, check_parameter_memory, memory_limit
from npbert.io import CheckpointError, read_safetensors, write_safetensors
from npbert.io import torch_pickle
from npbert.io.torch_pickle import read_torch_checkpoint
from reliability_helpers import config, corpus, write_vocab


# ---- a torch zip written by hand (no torch needed) ----------------------------------------------------
def state_dict_pickle(numel):
    """data.pkl of {"w": a float32 tensor of `numel` elements in storage "0"}, opcode by opcode
    (protocol 2), as torch.save writes it."""
    def u(s):
        b = s.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    def i(n):
        return b"J" + struct.pack("<i", n)
    return b"".join([
        b"\x80\x02}", u("w"),
        b"ctorch._utils\n_rebuild_tensor_v2\n", b"(",
        b"(", u("storage"), b"ctorch\nFloatStorage\n", u("0"), u("cpu"), i(numel), b"tQ",   # BINPERSID
        i(0), b"(", i(numel), b"t", b"(", i(1), b"t", b"\x89",                              # offset, size, stride, False
        b"ccollections\nOrderedDict\n)R",                                                   # backward hooks
        b"tR", b"s.",
    ])


def torch_zip(path, numel, storage_compression=zipfile.ZIP_STORED, pkl_compression=zipfile.ZIP_STORED, pad=b"",
              data_bytes=None):
    """A torch zip checkpoint of {"w": zeros(numel)}: data.pkl (+ `pad` after its STOP), byteorder,
    and the storage record data/0 (`data_bytes` bytes, numel x 4 unless given) streamed in 1 MiB
    chunks, each with the compression given."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("archive/data.pkl")
        info.compress_type = pkl_compression
        z.writestr(info, state_dict_pickle(numel) + pad)
        z.writestr("archive/byteorder", "little")
        info = zipfile.ZipInfo("archive/data/0")
        info.compress_type = storage_compression
        with z.open(info, "w", force_zip64=numel * 4 >= 2 ** 31) as f:
            chunk = bytes(1 << 20)
            left = numel * 4 if data_bytes is None else data_bytes
            while left:
                f.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return path


def test_the_hand_written_torch_zip_is_a_valid_checkpoint(tmp_path):
    got = read_torch_checkpoint(str(torch_zip(tmp_path / "ok.bin", 6)))
    assert list(got) == ["w"] and got["w"].shape == (6,) and not got["w"].any()


@pytest.fixture
def no_decompression(monkeypatch):
    """Records every zip member read or opened (a refused bomb must not be)."""
    opened = []
    real_open = zipfile.ZipFile.open

    def open_(self, name, *args, **kwargs):
        opened.append(name if isinstance(name, str) else name.filename)
        return real_open(self, name, *args, **kwargs)
    monkeypatch.setattr(zipfile.ZipFile, "open", open_)
    return opened


def test_a_zip_bomb_storage_is_refused_before_decompressing(tmp_path, no_decompression):
    """64 MiB of float32 zeros declared by the pickle, deflated to ~64 KiB: the compressed storage
    record is refused, and it is never opened."""
    path = torch_zip(tmp_path / "bomb.bin", 1 << 24, storage_compression=zipfile.ZIP_DEFLATED)
    no_decompression.clear()
    assert os.path.getsize(path) < (1 << 24) * 4 / 500                 # the file is a bomb: > 500:1
    with pytest.raises(CheckpointError, match=r"storage '0': record 'archive/data/0' is compressed .* refused"):
        read_torch_checkpoint(str(path))
    assert "archive/data/0" not in no_decompression


def test_a_declared_size_beyond_the_entry_is_refused(tmp_path, no_decompression):
    """The central directory says 2 GiB for a 24-byte stored record (and the pickle agrees): refused
    as running past the end of the file, nothing read."""
    big = (1 << 29) * 4
    path = torch_zip(tmp_path / "lie.bin", 1 << 29, data_bytes=24)      # the pickle declares 2 GiB
    data = bytearray(open(path, "rb").read())
    # the storage's central directory entry (the third) says 2 GiB too
    entries = [k for k in range(len(data)) if data[k:k + 4] == b"PK\x01\x02"]
    struct.pack_into("<II", data, entries[2] + 20, big, big)            # compressed, uncompressed sizes
    with open(path, "wb") as f:
        f.write(data)
    no_decompression.clear()
    with pytest.raises(CheckpointError, match="runs past the end of the file"):
        read_torch_checkpoint(str(path))
    assert "archive/data/0" not in no_decompression


def test_a_compressed_data_pkl_is_bounded(tmp_path, monkeypatch, no_decompression):
    # a real deflated data.pkl of 2 MiB (padding after STOP) against a 1 MiB record limit
    monkeypatch.setattr(torch_pickle, "MAX_RECORD_BYTES", 1 << 20)
    path = torch_zip(tmp_path / "pkl.bin", 6, pkl_compression=zipfile.ZIP_DEFLATED, pad=bytes(2 << 20))
    no_decompression.clear()
    with pytest.raises(CheckpointError, match="zip record 'archive/data.pkl' declares 2097"):
        read_torch_checkpoint(str(path))
    assert "archive/data.pkl" not in no_decompression
    # a forged size: 3 GB declared for a few hundred compressed bytes (beyond deflate's 1032:1)
    monkeypatch.undo()
    path = torch_zip(tmp_path / "forged.bin", 6, pkl_compression=zipfile.ZIP_DEFLATED)
    data = bytearray(open(path, "rb").read())
    first = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, first + 24, 3_000_000_000)
    open(path, "wb").write(data)
    with pytest.raises(CheckpointError, match="declares 3000000000 bytes from"):
        read_torch_checkpoint(str(path))



# ---- a data.pkl holding a 512 MiB bytes object (issue 36, item 20) ---------------------------------------
def bytes_pickle_zip(path, nbytes, declared=None):
    """A torch-style zip whose deflated data.pkl is {"w": <nbytes zero bytes>} (pickle protocol 4,
    BINBYTES8), streamed in 1 MiB chunks so that writing it takes no memory; `declared`: the
    uncompressed size written into the zip directory and the local header instead of the true one."""
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo("archive/data.pkl")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(b"\x80\x04}" + b"\x8c\x01w" + b"\x8e" + struct.pack("<Q", nbytes))
            left = nbytes
            while left:
                f.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
            f.write(b"s.")
        z.writestr("archive/byteorder", "little")
    if declared is not None:                     # the lie, in the central directory (what zipfile reads)
        data = bytearray(open(path, "rb").read())
        central = data.index(b"PK\x01\x02")
        assert struct.unpack_from("<I", data, central + 24)[0] == nbytes + 17      # the true size, 32 bits
        struct.pack_into("<I", data, central + 24, declared)
        open(path, "wb").write(data)
    return str(path)


def peak_memory_of(fn):
    """(what fn raised, the peak of Python's allocations while it ran, in bytes: tracemalloc sees
    every bytes object zipfile and zlib return, which is where an inflated record would live)."""
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
    except CheckpointError as e:
        raised = e
    else:
        raised = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


def test_a_huge_bytes_object_in_data_pkl_is_refused_from_its_declared_size(tmp_path, no_decompression):
    """512 MiB of zeros pickled as one bytes object and deflated (~0.5 MiB on disk): refused from the
    size the zip directory declares, data.pkl never opened, and the read takes under 16 MiB at its peak
    (before, it inflated the whole record first: 473 MiB; 16 MiB is room for the zip directory and the
    message, far below one 32 MiB chunk of the record)."""
    path = bytes_pickle_zip(tmp_path / "big.bin", 512 << 20)
    assert os.path.getsize(path) < (512 << 20) / 500
    no_decompression.clear()
    raised, peak = peak_memory_of(lambda: read_torch_checkpoint(path))
    pickled = (512 << 20) + 17                    # the bytes and 17 bytes of opcodes around them
    assert raised is not None and f"zip record 'archive/data.pkl' declares {pickled} bytes" in str(raised)
    assert "more than the 32 MiB a state dict's pickle could need" in str(raised)
    assert "archive/data.pkl" not in no_decompression
    assert peak < 16 << 20, f"peak {peak >> 20} MiB"
    # the command line says it in one line, naming the file
    model_dir = tmp_path / "m"
    npbert.BertModel(config(), seed=0).save_pretrained(str(model_dir))
    os.remove(model_dir / "model.safetensors")
    os.remove(model_dir / "manifest.json")
    os.replace(path, model_dir / "pytorch_model.bin")
    write_vocab(str(model_dir))
    assert main(["embed", "--model", str(model_dir), "the king"]) == 1


def test_a_data_pkl_declaring_less_than_it_inflates_to_stops_at_the_declared_size(tmp_path):
    """The same 512 MiB record whose zip directory claims 4 KiB (under every bound): inflated in
    1 MiB chunks that stop at the declared size, it fails its CRC-32 check having taken a few MiB
    (under 16 MiB, as above), not 512."""
    path = bytes_pickle_zip(tmp_path / "liar.bin", 512 << 20, declared=4096)
    assert zipfile.ZipFile(path).getinfo("archive/data.pkl").file_size == 4096
    raised, peak = peak_memory_of(lambda: read_torch_checkpoint(path))
    assert raised is not None and "CRC" in str(raised), raised
    assert peak < 16 << 20, f"peak {peak >> 20} MiB"


# ---- configs that ask for terabytes (item 7) -------------------------------------------------------------
@pytest.mark.parametrize("field,value,named", [
    ("max_position_embeddings", 10 ** 9, "position embeddings alone are max_position_embeddings (1000000000)"),
    ("num_hidden_layers", 10 ** 8, "encoder layers alone are num_hidden_layers (100000000)"),
    ("vocab_size", 10 ** 12, "word embeddings alone are vocab_size (1000000000000)"),
    ("intermediate_size", 10 ** 12, "intermediate_size 1000000000000"),
])
def test_a_config_asking_for_terabytes_is_refused_naming_the_field(tmp_path, field, value, named):
    # a model directory whose config.json was edited: refused before the weights are read or anything allocated
    model_dir = tmp_path / "m"
    npbert.BertModel(config(), seed=0).save_pretrained(str(model_dir))
    cfg = json.load(open(model_dir / "config.json"))
    cfg[field] = value
    json.dump(cfg, open(model_dir / "config.json", "w"))
    with pytest.raises(ValueError) as e:
        npbert.BertModel.from_pretrained(str(model_dir))
    assert str(e.value).startswith(f"{model_dir / 'config.json'}: BertConfig asks for ") and named in str(e.value)
    with pytest.raises(ValueError, match="more than the .* of memory here"):
        npbert.BertModel(config(**{field: value}))


def test_the_memory_limit_comes_from_the_environment_or_the_machine(monkeypatch):
    monkeypatch.setenv("NPBERT_MEMORY_LIMIT", "300M")
    assert memory_limit() == 300 << 20
    base = npbert.BertConfig()                                  # BERT-base: 440 MB of float32
    with pytest.raises(ValueError, match="the encoder layers alone are num_hidden_layers \\(12\\)"):
        check_parameter_memory(base)
    check_parameter_memory(base, limit=1 << 30)
    with pytest.raises(ValueError, match="float64"):
        check_parameter_memory(base, np.float64, limit=600 << 20)   # 880 MB in float64
    monkeypatch.setenv("NPBERT_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="NPBERT_MEMORY_LIMIT='lots'"):
        memory_limit()
    monkeypatch.delenv("NPBERT_MEMORY_LIMIT")
    assert memory_limit() > 1 << 28                             # a machine running this has > 256 MiB


def test_max_seq_length_against_the_model_and_memory():
    c = config(max_position_embeddings=32)
    with pytest.raises(ValueError, match="--max_seq_length 33 is more than the model's max_position_embeddings \\(32\\)"):
        check_max_seq_length(33, c)
    check_max_seq_length(32, c, batch_size=8)
    big = config(max_position_embeddings=200_000)
    with pytest.raises(ValueError, match="--max_seq_length 100000 with a batch of 32: one training step keeps about"):
        check_max_seq_length(100_000, big, batch_size=32)


def test_pretrain_refuses_a_huge_max_seq_length_before_cutting_the_corpus(tmp_path, capsys):
    vocab, text = write_vocab(str(tmp_path)), corpus(str(tmp_path))
    common = ["pretrain", "--train_file", text, "--vocab_file", vocab, "--max_steps", "1", "--plot", "false"]
    # a flag the model cannot take is a usage error (2); a --config asking for terabytes, a failure (1)
    assert main(common + ["--output_dir", str(tmp_path / "a"), "--max_seq_length", "100000"]) == 2
    err = capsys.readouterr().err
    assert "--max_seq_length 100000 is more than the 512 positions of --model_size tiny" in err, err
    cfg = tmp_path / "config.json"
    cfg.write_text(config(max_position_embeddings=200_000).to_json_string())
    assert main(common + ["--output_dir", str(tmp_path / "b"), "--max_seq_length", "100000", "--config",
                          str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "--max_seq_length 100000 with a batch of 32: one training step keeps about" in err and \
        f"(--config {cfg})" in err, err
    cfg.write_text(config(max_position_embeddings=16).to_json_string())
    assert main(common + ["--output_dir", str(tmp_path / "c"), "--max_seq_length", "24", "--config", str(cfg)]) == 2
    assert "max_position_embeddings (16)" in capsys.readouterr().err
    cfg.write_text(config(num_hidden_layers=10 ** 8).to_json_string())
    assert main(common + ["--output_dir", str(tmp_path / "d"), "--max_seq_length", "24", "--config", str(cfg)]) == 1
    assert f"--config {cfg}: BertConfig asks for" in capsys.readouterr().err


# ---- loads that notice ----------------------------------------------------------------------------------
@pytest.fixture
def six_layers(tmp_path):
    d = tmp_path / "six"
    npbert.BertModel(config(num_hidden_layers=6), seed=0).save_pretrained(str(d))
    return d


def edit_config(directory, **fields):
    cfg = json.load(open(directory / "config.json"))
    cfg.update(fields)
    json.dump(cfg, open(directory / "config.json", "w"))


@pytest.mark.parametrize("layers,word", [(5, "drop 1"), (7, "leave random 1")])
def test_a_config_whose_layer_count_disagrees_with_the_weights_is_refused(six_layers, layers, word):
    edit_config(six_layers, num_hidden_layers=layers)
    with pytest.raises(CheckpointError) as e:
        npbert.BertModel.from_pretrained(str(six_layers))
    assert f"holds 6 encoder layers (encoder.layer.0..5), but {six_layers / 'config.json'} says " \
           f"num_hidden_layers={layers}: loading would {word} layer(s)" in str(e.value)
    with pytest.raises(CheckpointError, match="num_hidden_layers=5"):
        npbert.BertModel.from_pretrained(str(six_layers), num_hidden_layers=5)   # an override is checked too


def test_non_finite_weights_are_refused_naming_the_tensor(six_layers):
    w = {k: np.array(v) for k, v in read_safetensors(str(six_layers / "model.safetensors")).items()}
    w["encoder.layer.3.output.dense.weight"][2, 5] = np.inf
    write_safetensors(str(six_layers / "model.safetensors"), w, {"format": "pt"})
    with pytest.raises(CheckpointError, match="weight 'encoder.layer.3.output.dense.weight' holds 1 non-finite "
                                              "value\\(s\\) \\(the first at \\(2, 5\\): inf\\)"):
        npbert.BertModel.from_pretrained(str(six_layers))


@pytest.mark.parametrize("fields,named", [({"num_hidden_layers": "6"}, "num_hidden_layers must be a positive integer"),
                                          ({"hidden_size": 15}, "not a multiple of the number of attention heads")])
def test_a_config_field_of_the_wrong_type_names_the_file(six_layers, fields, named):
    edit_config(six_layers, **fields)
    with pytest.raises(ValueError) as e:
        npbert.BertModel.from_pretrained(str(six_layers))
    assert str(e.value).startswith(str(six_layers / "config.json")) and named in str(e.value)
