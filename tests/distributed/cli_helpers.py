"""What the command-line data-parallel tests share (test_cli_mpi: `mpiexec -n 2` on one host;
test_two_hosts: two network namespaces standing in for two hosts): the tiny data, the argument
lists of the `npbert pretrain` and `npbert finetune` runs, the one-process run they are compared
to, and the comparison with its tolerance."""
import os

from heads.head_helpers import analytically_zero, assert_grads_close, rel
from reliability import reliability_helpers as rh

# float64, dropout 0.1 (the configs' default): see test_trainer_mpi.TOL, the same reasoning.
# Between W ranks and one process only the order of the gradient additions differs (per share,
# then across ranks), which in float64 is round-off: measured a few 1e-16 after the AdamW steps.
TOL = 1e-12
TIMEOUT = 240
# AdamW's epsilon 1e-4, as distributed_helpers.make_optimizer says why: the attention key biases' gradients
# are round-off (zero in exact arithmetic), which Adam with eps 1e-8 would turn into steps that
# differ between the two runs; the real gradients here are far above 1e-4.
COMMON = ["--dtype", "float64", "--adam_epsilon", "1e-4", "--plot", "false", "--logging_steps", "1", "--seed", "3"]


def cli_data(root):
    """The files the runs read, made under `root`: a pre-training .h5 and its vocab, the text
    corpus it was made from, a tiny base model, a classification train and dev CSV."""
    features, vocab = rh.pretraining_h5(str(root))
    return {"features": features, "vocab": vocab, "model": rh.base_model(root / "base"),
            "text": os.path.join(str(root), "corpus.txt"),
            "train": rh.write_csv(root / "train.csv", rh.sentences(22)),
            "dev": rh.write_csv(root / "dev.csv", rh.sentences(9, seed=1))}


def pretrain_argv(data, out, per_device, source="h5"):
    """`npbert pretrain` for 3 steps of 2 accumulated micro-batches, from create-pretraining-data's
    .h5 (static masks, source "h5") or from the text corpus with --dynamic_masking ("text")."""
    train = [data["features"]] if source == "h5" else [data["text"], "--dynamic_masking", "--max_seq_length", "24"]
    return ["pretrain", "--train_file", *train, "--vocab_file", data["vocab"], "--output_dir", str(out),
            "--max_steps", "3", "--save_steps", "2", "--per_device_train_batch_size", str(per_device),
            "--gradient_accumulation_steps", "2", "--learning_rate", "1e-3", *COMMON]


def finetune_argv(data, out, per_device):
    """`npbert finetune` of a sequence classifier for 2 epochs, evaluated and saved each epoch."""
    return ["finetune", "--task", "sequence-classification", "--model_name_or_path", data["model"],
            "--train_file", data["train"], "--validation_file", data["dev"], "--output_dir", str(out),
            "--num_train_epochs", "2", "--per_device_train_batch_size", str(per_device),
            "--per_device_eval_batch_size", "2", "--max_seq_length", "16", "--learning_rate", "1e-3",
            "--eval_strategy", "epoch", "--save_strategy", "epoch", *COMMON]


def one_process(argv):
    from npbert.cli import main
    assert main(argv) == 0


def weights(directory):
    return rh.saved_weights(str(directory))


def assert_same_model(got_dir, want_dir, cls_name, what="2 ranks"):
    """Every weight within TOL relative, but the attention key biases: they start at 0 and their
    gradient is 0 in exact arithmetic, so both runs leave them at round-off (~1e-20) that differs
    in every digit; they are held below 1e-9 x their layer's key weights on both sides instead
    (head_helpers.analytically_zero; a real gradient would move them by ~1e-3)."""
    got, want = weights(got_dir), weights(want_dir)
    zero = analytically_zero(want, cls_name)
    assert_grads_close(got, want, zero=zero, tol=TOL)
    worst = max(rel(got[k], w) for k, w in want.items() if k not in zero)
    assert worst <= TOL, f"the model saved by {what} is {worst:.2e} from one process's"
