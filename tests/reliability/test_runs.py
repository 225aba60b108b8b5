"""One run per output directory: concurrent runs, stale locks, another run's files, leftovers."""
import json
import os
import signal
import subprocess
import sys

import pytest

from npbert.cli.finetune import TASK_DEFAULTS
from npbert.io.errors import RunError
from npbert.training import runs
from npbert.training.runs import LOCK_NAME, RunLock, prepare_output_dir
from reliability_helpers import TIMEOUT, base_model, npbert_env, run_npbert, sentences, start_npbert, trainer, write_csv

HOLD = """
import sys, time
from npbert.training.runs import RunLock
lock = RunLock(sys.argv[1], command="holder of the lock").acquire()
print("locked", flush=True)
time.sleep(120)
"""


def hold_lock(directory):
    """A subprocess holding directory's run lock until killed; returns it once it holds it."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True,
                         env=npbert_env())
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_second_process_is_refused_with_the_first_ones_pid(tmp_path):
    holder = hold_lock(tmp_path / "out")
    try:
        with pytest.raises(RunError) as e:
            RunLock(tmp_path / "out").acquire()
        assert f"pid {holder.pid}" in str(e.value) and "holder of the lock" in str(e.value)
        assert str(tmp_path / "out") in str(e.value)
    finally:
        holder.kill()
        holder.wait(timeout=TIMEOUT)
    # the holder died without releasing: its lock file stays, naming a dead pid, and is taken over
    assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["pid"] == holder.pid
    with RunLock(tmp_path / "out"):
        assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert not (tmp_path / "out" / LOCK_NAME).exists()            # released: removed


def test_the_lock_is_reentrant_in_one_process_and_released_by_the_last_holder(tmp_path):
    outer = RunLock(tmp_path).acquire()
    with RunLock(tmp_path):                    # the Trainer inside a command that holds it
        pass
    assert (tmp_path / LOCK_NAME).exists()     # still held by `outer`
    outer.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_without_flock_a_stale_lock_of_a_dead_pid_is_replaced_and_a_live_one_refused(tmp_path, monkeypatch):
    lock = RunLock(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    import socket
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    fd, _ = lock._lock_by_create()
    os.close(fd)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": live.pid, "host": socket.gethostname()}))
        with pytest.raises(RunError, match=f"pid {live.pid}"):
            lock._lock_by_create()
    finally:
        live.kill()
        live.wait(timeout=TIMEOUT)


def test_ranks_other_than_zero_do_not_lock():
    assert runs.is_main_process({"OMPI_COMM_WORLD_RANK": "0"})
    assert not runs.is_main_process({"OMPI_COMM_WORLD_RANK": "2"})
    assert not runs.is_main_process({"PMI_RANK": "1"})
    assert runs.is_main_process({})


def test_two_finetune_runs_into_one_directory_one_is_refused(tmp_path):
    """The attack of item 1: two `npbert finetune` into one --output_dir.  The second, started while
    the first holds the lock, exits 1 naming the first one's pid; the first is then stopped by
    SIGTERM (it saves and says how to resume), and the directory holds its files only."""
    model = base_model(tmp_path / "base")
    train = write_csv(tmp_path / "train.csv", sentences(64))
    out = str(tmp_path / "out")
    common = ["finetune", "--task", "sequence-classification", "--model_name_or_path", model, "--train_file", train,
              "--output_dir", out, "--per_device_train_batch_size", "4", "--logging_steps", "1", "--max_seq_length",
              "32", "--plot", "false", "--save_strategy", "steps", "--save_steps", "1000"]
    first = start_npbert(common + ["--num_train_epochs", "500"])          # 8000 steps: still running below
    try:
        for line in first.stderr:                                   # wait until it trains
            if line.startswith("step "):
                break
        second = run_npbert(common + ["--num_train_epochs", "1", "--learning_rate", "5e-4"])
        assert second.returncode == 1, second.stderr
        assert f"pid {first.pid}" in second.stderr and "another run is using this output directory" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None                                 # the first was running all along
        first.send_signal(signal.SIGTERM)
        rest = first.communicate(timeout=TIMEOUT)[1]
    finally:
        first.kill()
        first.wait(timeout=TIMEOUT)
    assert first.returncode == 128 + signal.SIGTERM, rest
    assert "SIGTERM: stopped after step" in rest and "Traceback" not in rest
    names = sorted(n for n in os.listdir(out))
    assert len(names) == 1 and names[0].startswith("checkpoint-"), names       # its checkpoint, nothing else
    saved = json.load(open(os.path.join(out, names[0], "training_args.json")))
    default_lr = TASK_DEFAULTS["text-classification"]["learning_rate"]    # the first run gave no --learning_rate
    assert saved["num_train_epochs"] == 500 and saved["learning_rate"] == default_lr
    # a third run without a flag is refused: the directory holds a run's files
    third = run_npbert(common + ["--num_train_epochs", "1"])
    assert third.returncode == 1 and "already holds another run's files" in third.stderr, third.stderr
    assert "--overwrite_output_dir" in third.stderr and names[0] in third.stderr


def test_another_runs_checkpoints_need_overwrite_or_resume(tmp_path):
    """A new run into a directory holding another run's checkpoints: refused; with
    overwrite_output_dir the old checkpoints are removed (a later resume cannot continue the old
    run); resuming continues it."""
    old = trainer(tmp_path / "out", tmp_path, max_steps=6, learning_rate=1e-3)
    old.train()
    assert sorted(os.listdir(tmp_path / "out")) == ["checkpoint-2", "checkpoint-4", "checkpoint-6",
                                                    "trainer_state.json"]
    with pytest.raises(RunError, match="already holds another run's files.*checkpoint-2"):
        trainer(tmp_path / "out", tmp_path, max_steps=4, learning_rate=5e-4).train()
    new = trainer(tmp_path / "out", tmp_path, max_steps=4, learning_rate=5e-4, overwrite_output_dir=True)
    new.train()
    assert sorted(os.listdir(tmp_path / "out")) == ["checkpoint-2", "checkpoint-4", "trainer_state.json"]
    # the checkpoints now are the new run's: resuming checkpoint-4 with the old run's arguments is refused
    with pytest.raises(Exception, match="learning_rate: 0.0005 then, 0.001 now"):
        trainer(tmp_path / "out", tmp_path, max_steps=4, learning_rate=1e-3).train(resume_from_checkpoint=True)
    # and a model directory counts as another run's files too
    base_model(tmp_path / "model")
    with pytest.raises(RunError, match="config.json, model.safetensors|model.safetensors"):
        prepare_output_dir(str(tmp_path / "model"))


def test_leftovers_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    out = tmp_path / "out"
    t = trainer(out, tmp_path, max_steps=4)
    t.train()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    dpid, lpid = int(dead.stdout), os.getpid()
    for name in (f".tmp-checkpoint-6-{dpid}", f".old-checkpoint-4-{dpid}", f".tmp-save-{dpid}",
                 f".tmp-final-model-{dpid}", f".tmp-checkpoint-8-{lpid}", f".tmp-final-model-{lpid}"):
        os.makedirs(out / name)
        (out / name / "model.safetensors").write_bytes(b"half written")
    (out / f".trainer_state.json.{dpid}.abc123_x.tmp").write_text("{")
    removed = runs.clean_leftovers(str(out), log=lambda m: None)
    assert sorted(os.path.basename(p) for p in removed) == sorted(
        [f".tmp-checkpoint-6-{dpid}", f".old-checkpoint-4-{dpid}", f".tmp-save-{dpid}",
         f".tmp-final-model-{dpid}", f".trainer_state.json.{dpid}.abc123_x.tmp"])
    assert (out / f".tmp-checkpoint-8-{lpid}").exists()           # a live pid: not touched
    assert (out / f".tmp-final-model-{lpid}").exists()
    assert sorted(n for n in os.listdir(out) if not n.startswith(".")) == ["checkpoint-2", "checkpoint-4",
                                                                          "trainer_state.json"]
