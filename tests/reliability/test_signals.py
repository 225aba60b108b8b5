"""Ctrl-C and SIGTERM (item 9): `npbert pretrain` in a subprocess gets the signal mid-run, stops
after the step with a checkpoint, prints the step, the checkpoint and the command that resumes;
that command, run as printed, ends bit-identical to a run never interrupted.  A second signal
stops at once, in one line, without a traceback."""
import os
import shlex
import signal
import subprocess
import sys

import pytest

from npbert.training import TrainingInterrupted
from npbert.training.checkpoint import is_intact
from reliability_helpers import (REPO, TIMEOUT, config, npbert_env, params, pretrain_args, pretraining_h5, run_npbert,
                        same_bytes, saved_weights, start_npbert, trainer)

STEPS = 80


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("signals")
    features, vocab = pretraining_h5(str(d))
    cfg = d / "config.json"
    cfg.write_text(config().to_json_string())
    ref = run_npbert(pretrain_args(features, vocab, d / "ref", STEPS, "--config", str(cfg), "--save_steps", "1000"))
    assert ref.returncode == 0, ref.stderr
    return d, features, vocab, cfg, saved_weights(d / "ref")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_run_saves_says_how_to_resume_and_the_resume_is_bit_identical(data, tmp_path, signum):
    d, features, vocab, cfg, reference = data
    out = tmp_path / "out"
    p = start_npbert(pretrain_args(features, vocab, out, STEPS, "--config", str(cfg), "--save_steps", "1000"))
    try:
        for line in p.stderr:
            if line.startswith("step 5/"):
                p.send_signal(signum)
                break
        err = p.communicate(timeout=TIMEOUT)[1]
    finally:
        p.kill()
        p.wait(timeout=TIMEOUT)
    name = signal.Signals(signum).name
    assert p.returncode == 128 + signum, err
    assert f"{name} received: stopping at the end of this step" in err and "Traceback" not in err
    final = [line for line in err.splitlines() if line.startswith("npbert pretrain: error: ")]
    assert len(final) == 1, err
    step = int(final[0].split("stopped after step ")[1].split()[0])
    checkpoint = out / f"checkpoint-{step}"
    assert 5 <= step < STEPS and f"saved {checkpoint}; resume with: npbert pretrain " in final[0]
    assert is_intact(str(checkpoint)) and not os.path.exists(out / ".npbert-run.lock")
    command = shlex.split(final[0].split("resume with: ")[1])
    assert command[:2] == ["npbert", "pretrain"] and command[-2:] == ["--resume_from_checkpoint", str(checkpoint)]
    resumed = run_npbert(command[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert same_bytes(saved_weights(out), reference)


SECOND_SIGNAL = """
import os, signal, sys
from npbert.cli import main
from npbert.training import Trainer
real = Trainer._update
def update(self, micro, epoch):
    if self.state.global_step == 4:            # during step 5: Ctrl-C, and Ctrl-C again
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
    return real(self, micro, epoch)
Trainer._update = update
sys.exit(main(sys.argv[1:]))
"""


def test_a_second_ctrl_c_stops_at_once_in_one_line(data, tmp_path):
    d, features, vocab, cfg, _ = data
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-c", SECOND_SIGNAL,
                        *pretrain_args(features, vocab, out, STEPS, "--config", str(cfg))],
                       capture_output=True, text=True, env=npbert_env(), cwd=REPO, timeout=TIMEOUT)
    assert p.returncode == 130, p.stderr
    assert "Traceback" not in p.stderr
    final = [line for line in p.stderr.splitlines() if line.startswith("npbert pretrain: error: ")]
    assert final == [f"npbert pretrain: error: SIGINT again: stopped at once during step 5; the last checkpoint, "
                     f"{out / 'checkpoint-3'}, is whole (checkpoints are renamed into place only when complete); "
                     f"resume with: {final[0].split('resume with: ')[1]}"], p.stderr
    assert sorted(n for n in os.listdir(out) if not n.startswith(".")) == ["checkpoint-3"]
    assert not [n for n in os.listdir(out) if n.startswith(".tmp")]


def test_in_the_library_the_first_signal_saves_and_raises_training_interrupted(tmp_path):
    t = trainer(tmp_path / "out", tmp_path, max_steps=8, save_steps=100)
    real = t._update

    def update(micro, epoch):
        if t.state.global_step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(micro, epoch)
    t._update = update
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as e:
        t.train()
    assert e.value.step == 3 and e.value.exit_status == 143 and not e.value.immediate
    assert e.value.checkpoint == str(tmp_path / "out" / "checkpoint-3") and is_intact(e.value.checkpoint)
    assert f"resume with: Trainer.train(resume_from_checkpoint={e.value.checkpoint!r})" in str(e.value)
    assert signal.getsignal(signal.SIGTERM) is before                  # handlers put back
    resumed = trainer(tmp_path / "out", tmp_path, max_steps=8, save_steps=100)
    resumed.train(resume_from_checkpoint=e.value.checkpoint)
    uninterrupted = trainer(tmp_path / "ref", tmp_path, max_steps=8, save_steps=100)
    uninterrupted.train()
    assert same_bytes(params(resumed.model), params(uninterrupted.model))
