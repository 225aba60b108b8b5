"""weights_tools.convert / weights_tools.inspect: outputs, round trips, exit
codes, and the bert-base parameter count."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from npbert.io import read_state_dict

from io_helpers import assert_same_tensors

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
GOOGLE = os.path.join(FIXTURES, "google")
KERAS = os.path.join(FIXTURES, "tf_model_h5")

# weights_tools lives beside npbert/ but is not an installed package: import
# it from the repository root whether pytest runs as `pytest` or `python -m pytest`.
if REPO not in sys.path:
    sys.path.insert(0, REPO)
from weights_tools import convert  # noqa: E402
from weights_tools import inspect as inspect_tool  # noqa: E402


def run(module_or_script, *args):
    """Run a tool in a fresh interpreter, as a user would."""
    cmd = [sys.executable] + (["-m", module_or_script] if not module_or_script.endswith(".py")
                              else [os.path.join(REPO, module_or_script)]) + list(args)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("tool", ["weights_tools.convert", "weights_tools.inspect",
                                  "weights_tools/convert.py", "weights_tools/inspect.py"])
def test_help(tool):
    result = run(tool, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_inspect_reports_format_keys_counts_and_load_plan(capsys):
    assert inspect_tool.main([GOOGLE, "--class", "BertForSequenceClassification"]) == 0
    out = capsys.readouterr().out
    assert "format:   tf-checkpoint" in out and "Google TF variable names" in out
    assert "bert.encoder.layer.0.attention.self.query.weight" in out
    # tiny model: embeddings (40+24+2)*8 + 2*8 = 544, layer 600, pooler 72
    assert "bert.embeddings                             544" in out
    assert "1,816" in out                           # the BertModel part
    assert "classifier.weight" in out and "cls.seq_relationship.weight" in out


def test_inspect_json(capsys):
    assert inspect_tool.main([KERAS, "--json", "--class", "BertForPreTraining"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "keras-h5"
    assert report["parameters_total"] == 1962 and report["parameters_base_model"] == 1816
    assert report["load_into"]["missing"] == [] and report["load_into"]["unexpected"] == []
    shapes = {t["name"]: t["shape"] for t in report["tensors"]}
    assert shapes["bert.encoder.layer.0.intermediate.dense.weight"] == [16, 8]


def test_bert_base_parameter_count():
    """bert-base's BertModel has 109,482,240 parameters (transformers' count)."""
    npbert = pytest.importorskip("npbert")
    from weights_tools._common import expected_for_class
    shapes, _ = expected_for_class("BertModel", npbert.BertConfig().to_dict())
    # zero-stride arrays: the shapes without the memory
    tensors = {k: np.broadcast_to(np.float32(0), s) for k, s in shapes.items()}
    tensors["embeddings.position_ids"] = np.broadcast_to(np.int64(0), (1, 512))  # a buffer
    counts, total, base = inspect_tool.parameter_counts(tensors)
    assert total == 109_482_240 and base == 109_482_240
    assert counts["bert.encoder.layer.0"] == 7_087_872


@pytest.mark.parametrize("source", [GOOGLE, KERAS])
@pytest.mark.parametrize("suffix", ["model.safetensors", "model.h5"])
def test_convert_tf_to_files_round_trip(tmp_path, source, suffix):
    assert convert.main([source, str(tmp_path / suffix)]) == 0
    assert_same_tensors(read_state_dict(tmp_path / suffix), read_state_dict(source))


def test_convert_dtype_cast(tmp_path):
    assert convert.main([GOOGLE, str(tmp_path / "m.h5"), "--dtype", "float64"]) == 0
    got = read_state_dict(tmp_path / "m.h5")
    want = read_state_dict(GOOGLE)
    assert all(v.dtype == np.float64 for v in got.values())
    assert all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("source", [GOOGLE, KERAS])
def test_convert_tf_to_a_transformers_directory(tmp_path, source):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    assert convert.main([source, str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertForPreTraining"]
    model, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with np.load(os.path.join(FIXTURES, "expected.npz")) as z:
        ids, mask, types = (torch.tensor(z[f"inputs/{k}"]).long()
                            for k in ("input_ids", "attention_mask", "token_type_ids"))
        want = z["outputs/prediction_logits"]
    with torch.no_grad():
        got = model.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types)
    np.testing.assert_allclose(got.prediction_logits.numpy(), want, rtol=0, atol=1e-5)


def test_convert_bin_to_transformers_dir_renames_legacy_keys(tmp_path):
    torch = pytest.importorskip("torch")
    from io_helpers import tiny_hf_model
    model = tiny_hf_model("BertForMaskedLM")
    src = tmp_path / "src"
    src.mkdir()
    sd = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                   "LayerNorm.beta"): v
          for k, v in model.state_dict().items()}
    sd["bert.embeddings.position_ids"] = torch.arange(24)[None]
    torch.save(sd, src / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    model.config.to_json_file(src / "config.json")
    assert convert.main([str(src), str(tmp_path / "out")]) == 0
    got = read_state_dict(tmp_path / "out")
    assert not any(k.endswith((".gamma", ".beta", "position_ids")) for k in got)
    want = {k: v.numpy() for k, v in model.state_dict().items()}
    assert_same_tensors(got, want)


@pytest.mark.parametrize("tool", ["weights_tools.convert", "weights_tools.inspect"])
def test_bad_inputs_exit_nonzero_with_a_clear_message(tmp_path, tool):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a checkpoint at all")
    hostile = tmp_path / "hostile.bin"
    hostile.write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.")
    extra = [str(tmp_path / "out.safetensors")] if tool.endswith("convert") else []
    for path, message in [(tmp_path / "nope", "no such file"),
                          (garbage, "unknown checkpoint format"),
                          (hostile, "refusing to load global os.system")]:
        result = run(tool, str(path), *extra)
        assert result.returncode == 2, result
        assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.safetensors").exists()
    result = run(tool)                      # no arguments: argparse usage error
    assert result.returncode == 2 and "usage:" in result.stderr
