"""Whole saves: a full disk (an injected ENOSPC at every file, a real small tmpfs) and a SIGKILL at
exact points of every kind of save; afterwards the directory holds whole files only, the message
names the file, the step and what is intact, and a resume ends bit-identical."""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import npbert
from npbert.io import CheckpointError, SaveError, finish_interrupted_saves
from npbert.io import _atomic
from npbert.training import checkpoint as ckpt
from npbert.training.runs import clean_leftovers
from reliability_helpers import (TIMEOUT, config, params, pretrain_args, pretraining_h5, run_npbert, same_bytes,
                        saved_weights, trainer)

CHECKPOINT_FILES = ["model.safetensors", "config.json", "optimizer.safetensors", "optimizer.json", "scheduler.json",
                    "rng_state.json", "trainer_state.json", "training_args.json", "manifest.json"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    d = tmp_path_factory.mktemp("ref")
    t = trainer(d / "out", d)
    t.train()
    return params(t.model)


def full_disk_at(monkeypatch, name, inside="", parent=None):
    """The next atomic write of a file called `name` (in a path containing `inside`, in the
    directory `parent`) fails as a full disk does, at the flush."""
    real = _atomic.fsync_file

    def fsync_file(path):
        base = os.path.basename(path)
        if base.startswith(f".{name}.") and inside in path and parent in (None, os.path.dirname(path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real(path)
    monkeypatch.setattr(_atomic, "fsync_file", fsync_file)


@pytest.mark.parametrize("name", CHECKPOINT_FILES + ["rename"])
def test_a_full_disk_at_every_file_of_a_checkpoint_save(tmp_path, monkeypatch, uninterrupted, name):
    out = tmp_path / "out"
    t = trainer(out, tmp_path)
    if name == "rename":
        real = os.rename

        def rename(src, dst):
            if os.path.basename(str(dst)) == "checkpoint-4":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
            return real(src, dst)
        monkeypatch.setattr(os, "rename", rename)
    else:
        full_disk_at(monkeypatch, name, inside="checkpoint-4")
    with pytest.raises(SaveError) as e:
        t.train()
    message = str(e.value)
    assert e.value.errno == errno.ENOSPC and isinstance(e.value, OSError)
    assert "at step 4" in message and "No space left on device" in message and str(out / "checkpoint-4") in message
    assert (name if name != "rename" else "checkpoint-4") in message
    assert f"the last checkpoint, {out / 'checkpoint-2'}, is intact" in message
    assert sorted(os.listdir(out)) == ["checkpoint-2"]                  # no half checkpoint, no temporary dir
    monkeypatch.undo()
    resumed = trainer(out, tmp_path)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 6 and same_bytes(params(resumed.model), uninterrupted)


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_full_disk_during_save_pretrained_leaves_the_old_model(tmp_path, monkeypatch, name, existing):
    old = npbert.BertForSequenceClassification(config(num_labels=2), seed=1)
    new = npbert.BertForSequenceClassification(config(num_labels=3), seed=2)
    target = tmp_path / "model"
    if existing:
        old.save_pretrained(str(target))
        (target / "vocab.txt").write_text("kept\n")
    full_disk_at(monkeypatch, name)
    with pytest.raises(OSError) as e:
        new.save_pretrained(str(target))
    assert e.value.errno == errno.ENOSPC
    if not existing:
        assert not target.exists() and os.listdir(tmp_path) == []           # nothing, not half a model
        return
    assert sorted(os.listdir(target)) == ["config.json", "manifest.json", "model.safetensors", "vocab.txt"]
    again = npbert.BertForSequenceClassification.from_pretrained(str(target))
    assert again.config.num_labels == 2 and same_bytes(params(again), params(old))


def test_a_full_disk_at_the_final_trainer_state_names_the_file(tmp_path, monkeypatch):
    out = tmp_path / "out"
    t = trainer(out, tmp_path)
    full_disk_at(monkeypatch, "trainer_state.json", parent=str(out))
    with pytest.raises(SaveError) as e:
        t.train()
    assert e.value.errno == errno.ENOSPC and str(out / "trainer_state.json") == e.value.filename
    assert "at step 6" in str(e.value) and f"the last checkpoint, {out / 'checkpoint-6'}, is intact" in str(e.value)
    assert sorted(os.listdir(out)) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]


KILL_AT = """
import os, signal, sys
sys.path.insert(0, {tests!r})
import npbert
from npbert.io import _atomic
from npbert.training import checkpoint as ckpt
from reliability_helpers import trainer
point, out, work = sys.argv[1], sys.argv[2], sys.argv[3]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

real_fsync, real_rename, real_replace = _atomic.fsync_file, os.rename, os.replace
if point == "write":                       # while checkpoint-4's optimizer.safetensors is written
    def fsync_file(path):
        if ".tmp-checkpoint-4-" in path and os.path.basename(path).startswith(".optimizer.safetensors."):
            die()
        return real_fsync(path)
    _atomic.fsync_file = fsync_file
t = trainer(out, work)
t.train()
if point == "between-renames":             # saving checkpoint-6 again: killed after the old one moved aside
    def rename(src, dst):
        real_rename(src, dst)
        if os.path.basename(dst).startswith(".old-checkpoint-6-"):
            die()
    os.rename = rename
    t._save_checkpoint()
if point == "moving-in":                   # save_pretrained over a saved model: killed after one file moved in
    t.save_model(out)
    def replace(src, dst):
        real_replace(src, dst)
        if ".tmp-save-" in src and os.path.dirname(dst) == out:
            die()
    os.replace = replace
    t.model.config.finetuning_task = "new"
    t.model.state.params["classifier.bias"] += 1
    t.save_model(out)
print("not killed")
"""


def killed_at(tmp_path, point):
    out = tmp_path / "out"
    code = KILL_AT.format(tests=os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code, point, str(out), str(tmp_path)], capture_output=True,
                       text=True, timeout=TIMEOUT, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert p.returncode == -9, (p.returncode, p.stderr[-2000:])
    return out, p


def test_a_kill_while_a_checkpoint_is_written_leaves_the_previous_one_and_litter_that_is_cleaned(
        tmp_path, uninterrupted):
    out, p = killed_at(tmp_path, "write")
    names = sorted(os.listdir(out))
    assert [n for n in names if not n.startswith(".")] == ["checkpoint-2"], names
    assert any(n.startswith(".tmp-checkpoint-4-") for n in names) and ".npbert-run.lock" in names, names
    assert ckpt.is_intact(str(out / "checkpoint-2"))
    resumed = trainer(out, tmp_path)
    resumed.train(resume_from_checkpoint=True)            # takes the dead run's lock, cleans its litter
    assert not any(n.startswith(".") for n in os.listdir(out)), os.listdir(out)
    assert same_bytes(params(resumed.model), uninterrupted)


def test_a_kill_between_the_two_renames_is_recovered(tmp_path, uninterrupted):
    out, p = killed_at(tmp_path, "between-renames")
    names = sorted(os.listdir(out))
    assert "checkpoint-6" not in names
    assert any(n.startswith(".old-checkpoint-6-") for n in names) and any(n.startswith(".tmp-checkpoint-6-")
                                                                          for n in names), names
    logged = []
    clean_leftovers(str(out), log=logged.append)
    assert sorted(n for n in os.listdir(out) if not n.startswith(".")) == ["checkpoint-2", "checkpoint-4",
                                                                          "checkpoint-6", "trainer_state.json"]
    assert not [n for n in os.listdir(out) if n.startswith((".tmp", ".old"))]
    assert ckpt.is_intact(str(out / "checkpoint-6")) and "recovered" in logged[0]
    from npbert.io import read_safetensors
    w = read_safetensors(str(out / "checkpoint-6" / "model.safetensors"))
    assert same_bytes(w, uninterrupted)


def test_a_kill_between_the_renames_with_an_incomplete_new_copy_puts_the_old_one_back(tmp_path):
    out, p = killed_at(tmp_path, "between-renames")
    new = next(n for n in os.listdir(out) if n.startswith(".tmp-checkpoint-6-"))
    os.unlink(out / new / "manifest.json")                  # as if killed before the manifest was written
    clean_leftovers(str(out), log=lambda m: None)
    assert ckpt.is_intact(str(out / "checkpoint-6"))
    assert not [n for n in os.listdir(out) if n.startswith((".tmp", ".old"))]


def test_a_kill_while_a_model_save_moves_its_files_in_is_refused_then_rolled_forward(tmp_path):
    out, p = killed_at(tmp_path, "moving-in")
    # the new model.safetensors / config.json pair is split between out/ and out/.tmp-save-<pid>/
    with pytest.raises(CheckpointError, match="interrupted while moving its files in"):
        npbert.BertForSequenceClassification.from_pretrained(str(out))
    assert json.load(open(out / "config.json")).get("finetuning_task") == "new"     # config.json moved first
    finished = finish_interrupted_saves(str(out))
    assert len(finished) == 1 and not os.path.exists(finished[0])
    model = npbert.BertForSequenceClassification.from_pretrained(str(out))
    assert model.config.finetuning_task == "new"
    reference = trainer(tmp_path / "again", tmp_path)
    reference.train()
    expected = reference.model.state.params["classifier.bias"] + 1
    assert np.array_equal(model.state.params["classifier.bias"], expected)      # the new weights with it


def test_a_real_full_disk_in_a_small_tmpfs(tmp_path):
    """`npbert pretrain` into a tmpfs too small for its checkpoints (a private mount namespace, so no
    privileges are needed where user namespaces are allowed): exit 1 with a one-line message naming
    errno 28, the file and the step; the checkpoint it calls intact is, and resuming from it ends
    bit-identical to a run on a roomy disk."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a private tmpfs")
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"],
                           capture_output=True, text=True, timeout=TIMEOUT)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.strip()}")
    features, vocab = pretraining_h5(str(tmp_path))
    cfg = tmp_path / "config.json"
    cfg.write_text(config().to_json_string())
    extra = ["--config", str(cfg), "--max_steps", "12"]
    ref = run_npbert(pretrain_args(features, vocab, tmp_path / "ref", 12) + extra[:2])
    assert ref.returncode == 0, ref.stderr
    size = sum(os.path.getsize(os.path.join(tmp_path / "ref" / "checkpoint-3", n))
               for n in os.listdir(tmp_path / "ref" / "checkpoint-3"))
    disk, saved = tmp_path / "disk", tmp_path / "saved"
    disk.mkdir()
    argv = " ".join(["python", "-m", "npbert"] + pretrain_args(features, vocab, disk / "out", 12) + extra[:2])
    script = textwrap.dedent(f"""
        mount -t tmpfs -o size={int(size * 2.6) // 4096 * 4096} tmpfs {disk} || exit 99
        {sys.executable} -m npbert {argv.split(' ', 3)[3]} 2> {tmp_path}/stderr.txt
        echo $? > {tmp_path}/rc.txt
        ls -a {disk}/out > {tmp_path}/ls.txt
        cp -r {disk}/out {saved}
    """)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env)
    assert done.returncode == 0, done.stderr
    stderr = (tmp_path / "stderr.txt").read_text()
    assert (tmp_path / "rc.txt").read_text().strip() == "1", stderr
    error = [line for line in stderr.splitlines() if line.startswith("npbert pretrain: error:")]
    assert len(error) == 1 and "Traceback" not in stderr, stderr
    assert "No space left on device (errno 28) writing " in error[0] and "at step" in error[0]
    assert ".tmp-checkpoint-" in error[0].split(" writing ")[1].split(";")[0] and \
        os.path.basename(error[0].split(" writing ")[1].split(";")[0]) in CHECKPOINT_FILES   # the file named
    step = int(error[0].split("at step ")[1].split()[0])
    listed = (tmp_path / "ls.txt").read_text().split()
    assert not [n for n in listed if n.startswith((".tmp", ".old"))], listed     # nothing half written
    intact = [n for n in listed if n.startswith("checkpoint-")]
    last = max(intact, key=lambda n: int(n.split("-")[1]))
    assert f"{disk}/out/{last}, is intact" in error[0] and int(last.split("-")[1]) < step
    assert ckpt.is_intact(str(saved / last))
    resumed = run_npbert(pretrain_args(features, vocab, saved, 12) + extra[:2]
                         + ["--resume_from_checkpoint", str(saved / last)])
    assert resumed.returncode == 0, resumed.stderr
    assert same_bytes(saved_weights(saved), saved_weights(tmp_path / "ref"))
