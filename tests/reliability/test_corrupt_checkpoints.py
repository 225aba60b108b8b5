"""Resume trusts nothing it reads (item 6): each corrupt or inconsistent checkpoint is refused with
the file and what disagrees, the newest intact checkpoint is offered, and resuming from it ends
bit-identical; changed arguments are listed and refused unless --ignore_changed_args."""
import json
import os
import shutil
import struct
import warnings

import numpy as np
import pytest

from npbert.io import CheckpointError, read_safetensors, write_manifest, write_safetensors
from reliability_helpers import params, same_bytes, trainer


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run with checkpoint-2, -4, -6, and its final parameters."""
    d = tmp_path_factory.mktemp("run")
    t = trainer(d / "out", d)
    t.train()
    return d, params(t.model)


@pytest.fixture
def out(run, tmp_path):
    """A private copy of the run's checkpoints (without the final trainer_state.json)."""
    d = tmp_path / "out"
    d.mkdir()
    for n in ("checkpoint-2", "checkpoint-4", "checkpoint-6"):
        shutil.copytree(run[0] / "out" / n, d / n)
    return d


def edit_json(path, change, manifest=True):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    if manifest:                       # a consistent manifest: the check behind it must find the fault
        write_manifest(str(path.parent))


def flip_exponent_bit(path):
    """Flip the top exponent bit of the first weight of word_embeddings: 0.02 becomes ~1e36."""
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    name = next(k for k in header if k.endswith("word_embeddings.weight"))
    start = 8 + n + header[name]["data_offsets"][0] + 4 * 16       # row 1 (row 0 is padding, zero)
    data[start + 3] ^= 0x40
    path.write_bytes(bytes(data))
    return name


def drop_optimizer_arrays(directory, keep):
    arrays = read_safetensors(str(directory / "optimizer.safetensors"))
    write_safetensors(str(directory / "optimizer.safetensors"), {k: v for k, v in arrays.items() if keep(k)},
                      {"format": "npbert-optimizer"})
    write_manifest(str(directory))


CORRUPTIONS = {
    # name: (how to break checkpoint-6, what the error must say)
    "bit flipped in the weights": (lambda d: flip_exponent_bit(d / "model.safetensors"),
                                   r"model.safetensors: SHA-256 .* differs"),
    "bit flipped, manifest redone": (lambda d: (flip_exponent_bit(d / "model.safetensors"),
                                                write_manifest(str(d))),
                                     None),   # a finite 1e36: only the manifest could tell; see the test
    "nan weight, manifest redone": (lambda d: (_nan_weight(d), write_manifest(str(d))),
                                    r"model.safetensors: weight '.*' holds 1 non-finite"),
    "truncated weights": (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:-7]),
                          r"model.safetensors: \d+ bytes, manifest.json says \d+"),
    "no optimizer moments": (lambda d: drop_optimizer_arrays(d, lambda k: False),
                             r"optimizer.safetensors: holds no optimizer state"),
    "one parameter's moments missing": (lambda d: drop_optimizer_arrays(d, lambda k: "classifier.bias" not in k),
                                        r"optimizer state of 1 of \d+ parameters is incomplete, e.g. 'classifier.bias'"),
    "global_step 5 in checkpoint-6": (lambda d: edit_json(d / "trainer_state.json", lambda s: s.update(global_step=5)),
                                      r"trainer_state.json: global_step is 5, but the directory is checkpoint-6"),
    "scheduler at another step": (lambda d: edit_json(d / "scheduler.json", lambda s: s.update(last_epoch=4)),
                                  r"scheduler.json: the scheduler is at step 4, trainer_state.json at global_step 6"),
    "optimizer step count differs": (lambda d: edit_json(d / "optimizer.json",
                                                         lambda s: s["scalars"]["classifier.bias"].update(step=3)),
                                     r"optimizer.json: the optimizer's step count is 3"),
    "global_step a string": (lambda d: edit_json(d / "trainer_state.json", lambda s: s.update(global_step="6")),
                             r"trainer_state.json: field 'global_step' must be an integer >= 0, got '6'"),
    "log_history not a list": (lambda d: edit_json(d / "trainer_state.json", lambda s: s.update(log_history={})),
                               r"trainer_state.json: field 'log_history' must be a list"),
    "trainer_state not JSON": (lambda d: ((d / "trainer_state.json").write_text("{'global_step': 6"),
                                          write_manifest(str(d))),
                               r"trainer_state.json: not valid JSON"),
    "optimizer.json malformed": (lambda d: edit_json(d / "optimizer.json", lambda s: s.pop("param_groups")),
                                 r"optimizer.json: malformed"),
    "rng state malformed": (lambda d: edit_json(d / "rng_state.json", lambda s: s.update(dropout={"state": 1})),
                            r"rng_state.json: 'dropout' is not a generator state"),
    "manifest lists a missing file": (lambda d: os.unlink(d / "scheduler.json"),
                                      r"scheduler.json: missing \(listed in manifest.json\)"),
    "manifest not a manifest": (lambda d: (d / "manifest.json").write_text("[1, 2]"),
                                r"manifest.json: not an npbert manifest"),
    "optimizer array nan": (lambda d: (_nan_moment(d), write_manifest(str(d))),
                            r"optimizer.safetensors: optimizer array '.*' holds 1 non-finite"),
}


def _nan_weight(d):
    w = read_safetensors(str(d / "model.safetensors"))
    w = {k: np.array(v) for k, v in w.items()}
    w["classifier.weight"][0, 0] = np.nan
    write_safetensors(str(d / "model.safetensors"), w, {"format": "pt"})


def _nan_moment(d):
    a = {k: np.array(v) for k, v in read_safetensors(str(d / "optimizer.safetensors")).items()}
    a[sorted(a)[0]].reshape(-1)[0] = np.inf
    write_safetensors(str(d / "optimizer.safetensors"), a, {"format": "npbert-optimizer"})


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_a_corrupt_latest_checkpoint_is_named_and_the_newest_intact_one_offered(run, out, tmp_path, case):
    breaks, expected = CORRUPTIONS[case]
    breaks(out / "checkpoint-6")
    t = trainer(out, tmp_path)
    if expected is None:
        # a finite exponent flip under a manifest written after it cannot be told from a trained
        # weight: the checkpoint loads, and the flipped value is what it holds (documented limit)
        t.train(resume_from_checkpoint=str(out / "checkpoint-6"))
        assert abs(t.model.state.params["bert.embeddings.word_embeddings.weight"][1, 0]) > 1e30
        return
    with pytest.raises(CheckpointError) as e:
        t.train(resume_from_checkpoint=True)
    message = str(e.value)
    assert message.startswith(f"cannot resume from {out / 'checkpoint-6'}: ")
    import re
    assert re.search(expected, message), message
    offered = str(out / "checkpoint-4")
    assert f"the newest intact checkpoint is {offered}: resume from it with --resume_from_checkpoint {offered}" \
        in message
    # nothing was changed by the refused resume, and the offered checkpoint continues the run exactly
    fresh = trainer(out, tmp_path)
    assert same_bytes(params(t.model), params(fresh.model))
    fresh.train(resume_from_checkpoint=offered)
    assert same_bytes(params(fresh.model), run[1])


def test_no_checkpoint_yet_and_a_missing_directory_say_so(tmp_path):
    with pytest.raises(CheckpointError, match="holds no checkpoint-<step> directory yet, so there is nothing to "
                                              "resume; start the run without --resume_from_checkpoint"):
        trainer(tmp_path / "empty", tmp_path).train(resume_from_checkpoint=True)
    with pytest.raises(CheckpointError, match="nowhere/checkpoint-9: no such checkpoint directory"):
        trainer(tmp_path / "o", tmp_path).train(resume_from_checkpoint=str(tmp_path / "nowhere" / "checkpoint-9"))


def test_a_checkpoint_without_manifest_loads_with_a_warning(run, out, tmp_path):
    os.unlink(out / "checkpoint-4" / "manifest.json")         # as written by npbert before manifests
    t = trainer(out, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t.train(resume_from_checkpoint=str(out / "checkpoint-4"))
    assert any("has no manifest.json" in str(w.message) for w in caught)
    assert same_bytes(params(t.model), run[1])


CHANGES = [("seed", 8, "seed: 7 then, 8 now"), ("learning_rate", 5e-3, "learning_rate: 0.01 then, 0.005 now"),
           ("weight_decay", 0.1, "weight_decay: 0.0 then, 0.1 now"),
           ("per_device_train_batch_size", 2, "per_device_train_batch_size: 4 then, 2 now"),
           ("gradient_accumulation_steps", 2, "gradient_accumulation_steps: 1 then, 2 now"),
           ("max_steps", 8, "max_steps: 6 then, 8 now"), ("optim", "adam", "optim: 'adamw' then, 'adam' now"),
           ("lr_scheduler_type", "cosine", "lr_scheduler_type: 'linear' then, 'cosine' now"),
           ("warmup_steps", 1, "warmup_steps: 0 then, 1 now"), ("max_grad_norm", 0.5, "max_grad_norm: 1.0 then, 0.5 now"),
           ("adam_beta2", 0.99, "adam_beta2: 0.999 then, 0.99 now")]


@pytest.mark.parametrize("field,value,listed", CHANGES, ids=[c[0] for c in CHANGES])
def test_a_changed_argument_is_listed_and_refused(run, out, tmp_path, field, value, listed):
    t = trainer(out, tmp_path, **{field: value})
    with pytest.raises(CheckpointError) as e:
        t.train(resume_from_checkpoint=str(out / "checkpoint-4"))
    assert listed in str(e.value) and "--ignore_changed_args" in str(e.value)


def test_several_changes_are_all_listed_and_ignore_changed_args_applies_the_new_values(run, out, tmp_path):
    with pytest.raises(CheckpointError) as e:
        trainer(out, tmp_path, seed=1, learning_rate=1e-3, weight_decay=0.5).train(
            resume_from_checkpoint=str(out / "checkpoint-4"))
    for text in ("seed: 7 then, 1 now", "learning_rate: 0.01 then, 0.001 now", "weight_decay: 0.0 then, 0.5 now"):
        assert text in str(e.value)
    t = trainer(out, tmp_path, learning_rate=1e-3, weight_decay=0.5, ignore_changed_args=True)
    t.train(resume_from_checkpoint=str(out / "checkpoint-4"))
    # the new rate from step 4 on: linear decay to 0 at step 6 from 1e-3 (not 1e-2)
    lrs = [e["learning_rate"] for e in t.state.log_history if "learning_rate" in e and e["step"] > 4]
    assert lrs and abs(lrs[0] - 1e-3 * (6 - 5) / 6) < 1e-12, lrs
    assert all(g["weight_decay"] in (0.5, 0.0) for g in t.optimizer.param_groups)
    assert any(g["weight_decay"] == 0.5 for g in t.optimizer.param_groups)
    assert not same_bytes(params(t.model), run[1])


def test_the_nan_message_says_intact_only_when_it_is(tmp_path):
    """"The last checkpoint is intact" is printed only when it is: no checkpoint yet, a corrupt
    last one, and an intact one each get their own sentence."""

    def poisoned(out, at):
        t = trainer(out, tmp_path, max_steps=8)
        real = t._update

        def update(micro, epoch):
            if t.state.global_step == at:
                t.model.state.params["classifier.bias"][:] = np.nan
            return real(micro, epoch)
        t._update = update
        return t

    with pytest.raises(FloatingPointError, match=f"no checkpoint was saved in {tmp_path / 'a'}"):
        poisoned(tmp_path / "a", 1).train()
    with pytest.raises(FloatingPointError, match=f"the last checkpoint, {tmp_path / 'b' / 'checkpoint-4'}, is intact"):
        poisoned(tmp_path / "b", 5).train()
    t = poisoned(tmp_path / "c", 5)
    real_save = t._save_checkpoint

    def save_then_corrupt(is_best=False):
        path = real_save(is_best)
        if path.endswith("checkpoint-4"):
            with open(os.path.join(path, "scheduler.json"), "a") as f:
                f.write(" ")
        return path
    t._save_checkpoint = save_then_corrupt
    with pytest.raises(FloatingPointError) as e:
        t.train()
    assert "checkpoint-4, fails its manifest check; the newest intact one is" in str(e.value)
    assert str(tmp_path / "c" / "checkpoint-2") in str(e.value)
