"""Issue 36, items 16-19: what a new user met trying the commands (item 15, a data-parallel run
saying so: test_world_line.py; item 20, a zip bomb in data.pkl: test_bounds_and_loads.py).

    16 finetune --do_predict and predict wrote different records    the same records, field for field
    17 predict --task ner worked, finetune --task ner did not        one table of names and aliases
    18 user errors exited 1 in some commands, 2 in others            2 for what was typed, 1 for failures
    19 a 16-example fine-tune left 347 MB without a word             transformers' default (no checkpoint
                                                                    before --save_steps); a line saying
                                                                    what each save keeps; --save_only_model
"""
import json
import os

import numpy as np
import pytest

import npbert
from npbert.cli import build_parser, main
from reliability_helpers import base_model, config, run_npbert, sentences, write_csv, write_vocab

LABELS = {0: "negative", 1: "positive"}


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err):
    """The one error line, the last of stderr (notes may come before it)."""
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A base model, a classifier fine-tuned on 16 sentences (no checkpoint: save_strategy no), a
    test file with an id column, and checkpoints of other heads."""
    root = tmp_path_factory.mktemp("new-user")
    base = base_model(root / "base")
    train = write_csv(root / "train.csv", sentences(16))
    test = write_csv(root / "test.csv", [(f"t{i}", s) for i, (s, _) in enumerate(sentences(7, seed=3))],
                     header=("id", "sentence"))
    clf = str(root / "clf")
    assert main(["finetune", "--task", "sequence-classification", "--model_name_or_path", base, "--train_file", train,
                 "--output_dir", clf, "--max_steps", "3", "--learning_rate", "1e-3", "--save_strategy", "no",
                 "--plot", "false", "--seed", "1"]) == 0
    mlm = str(root / "mlm")
    npbert.BertForMaskedLM(config(), seed=3).save_pretrained(mlm)
    write_vocab(mlm)
    return {"root": root, "base": base, "train": train, "test": test, "clf": clf, "mlm": mlm}


# ---- 16: the same records from both commands -----------------------------------------------------------
@pytest.mark.parametrize("batch", ["1", "4"])
def test_finetune_do_predict_and_predict_write_the_same_records(made, tmp_path, capsys, batch):
    """The records of docs/inference.md, {"id", "label", "score", "scores"}, from both commands on the
    same model and file.  With finetune's evaluation batch 1 the two run the same forward and the
    numbers are bit-identical; with batch 4 the padded batch changes float32 round-off only (the
    attention mask keeps the padding out), so scores agree within 1e-6 (float32's epsilon is 1.2e-7,
    a probability sums a few dozen such roundings)."""
    status, _, err = run(capsys, "finetune", "--task", "text-classification", "--model_name_or_path", made["clf"],
                         "--do_predict", "--test_file", made["test"], "--output_dir", tmp_path / "ft",
                         "--per_device_eval_batch_size", batch)
    assert status == 0, err
    status, _, err = run(capsys, "predict", "--model", made["clf"], "--input", made["test"], "--output",
                         tmp_path / "pred.jsonl")
    assert status == 0, err
    ours = [json.loads(line) for line in open(tmp_path / "ft" / "predictions.jsonl")]
    theirs = [json.loads(line) for line in open(tmp_path / "pred.jsonl")]
    assert len(ours) == len(theirs) == 7
    for a, b in zip(ours, theirs):
        assert list(a) == list(b) == ["id", "label", "score", "scores"], (a, b)
        assert a["id"] == b["id"] and a["label"] == b["label"]
        assert [s["label"] for s in a["scores"]] == [s["label"] for s in b["scores"]]
        if batch == "1":
            assert a == b
        else:
            got = np.array([a["score"]] + [s["score"] for s in a["scores"]])
            want = np.array([b["score"]] + [s["score"] for s in b["scores"]])
            assert np.max(np.abs(got - want)) <= 1e-6, (a, b)
    assert [r["id"] for r in ours] == [f"t{i}" for i in range(7)]


# ---- 17: one set of task names -----------------------------------------------------------------------
@pytest.mark.parametrize("name,task", [("text-classification", "text-classification"),
                                       ("sequence-classification", "text-classification"),
                                       ("sentiment-analysis", "text-classification"),
                                       ("token-classification", "token-classification"),
                                       ("ner", "token-classification"),
                                       ("question-answering", "question-answering"),
                                       ("multiple-choice", "multiple-choice")])
def test_finetune_and_predict_take_the_same_task_names(name, task):
    parser = build_parser()
    finetune = parser.parse_args(["finetune", "--task", name, "--model_name_or_path", "m", "--output_dir", "o"])
    predict = parser.parse_args(["predict", "--task", name, "--model", "m", "--input", "i", "--output", "o"])
    assert finetune.task == predict.task == task
    if task != "multiple-choice":                       # (transformers has no multiple-choice pipeline)
        from npbert.pipelines import SUPPORTED_TASKS
        from npbert.task_names import canonical_task
        assert canonical_task(name) in SUPPORTED_TASKS


def test_the_task_names_are_defined_once():
    from npbert import task_names
    from npbert.cli import predict
    from npbert.pipelines import TASK_ALIASES, architectures, base
    assert TASK_ALIASES is task_names.TASK_ALIASES and base.ARCHITECTURE_TASKS is task_names.ARCHITECTURE_TASKS
    assert architectures.ARCHITECTURE_SERVES is task_names.ARCHITECTURE_SERVES
    assert not hasattr(predict, "TASK_NAMES") and set(predict.TASKS) <= set(task_names.TASKS)


@pytest.mark.parametrize("argv,said", [
    (["finetune", "--task", "fill-mask"], "npbert finetune does not run 'fill-mask' (npbert pretrain trains a masked LM"),
    (["finetune", "--task", "summarization"], "npbert finetune does not run 'summarization'; give one of "
                                              "text-classification (or sentiment-analysis, sequence-classification)"),
    (["predict", "--task", "feature-extraction"], "npbert predict does not run 'feature-extraction' (npbert embed"),
])
def test_a_task_a_command_does_not_run_names_the_one_that_does(argv, said, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv + ["--model_name_or_path", "m", "--output_dir", "o"] if argv[0] == "finetune"
             else argv + ["--model", "m", "--input", "i", "--output", "o"])
    line = one_error_line(capsys.readouterr().err)
    assert e.value.code == 2 and said in line, line


def test_the_pipeline_takes_the_same_aliases(made):
    assert npbert.pipeline("sequence-classification", model=made["clf"]).task == "text-classification"
    with pytest.raises(KeyError, match="'multiple-choice' .*npbert predict --task multiple-choice"):
        npbert.pipeline("multiple-choice", model=made["clf"])


# ---- 18: exit status 2 for what was typed wrong, in every command; 1 for a failure ---------------------
def user_errors(made, tmp):
    """(argv, what the one line must say): a user error of each command."""
    missing = str(tmp / "no-such-dir")
    a_file = write_csv(tmp / "a.csv", [("x", "1")])
    return [
        (["demo", "--output_dir", a_file], "a file of that name exists"),
        (["explain", "--model", missing], "no such file or directory"),
        (["build-vocab", "--input_file", missing, "--vocab_size", "30"], "no such file"),
        (["create-pretraining-data", "--input_file", missing, "--output_file", str(tmp / "f.h5"), "--vocab_file",
          made["base"] + "/vocab.txt"], "no such file"),
        (["pretrain", "--train_file", missing, "--output_dir", str(tmp / "p")], "no such file"),
        (["fill-mask", "--model", made["clf"], "the [MASK] speaks"], "no trained masked-LM head"),   # a classifier
        (["finetune", "--task", "ner", "--model_name_or_path", missing, "--train_file", made["train"],
          "--output_dir", str(tmp / "f")], "no such directory"),
        (["finetune", "--task", "ner", "--model_name_or_path", made["base"], "--train_file", missing,
          "--output_dir", str(tmp / "f")], "--train_file " + missing + ": no such file"),
        (["predict", "--model", missing, "--input", made["test"], "--output", str(tmp / "o.jsonl")],
         "no such directory"),
        (["predict", "--model", str(tmp), "--input", made["test"], "--output", str(tmp / "o.jsonl")],
         "not a checkpoint directory: no config.json in it"),
        (["attention", "--model", missing, "--text", "the king"], "no such directory"),
        (["embed", "--model", missing, "the king"], "no such directory"),
        (["attribute", "--model", made["mlm"], "--text", "the [MASK] speaks", "--target", "2:zebra", "--method",
          "saliency", "--output", str(tmp / "a.html")], "'zebra' is not in the model's vocabulary"),
        (["attribute", "--model", made["clf"], "--text", "the king", "--target", "neutral", "--output",
          str(tmp / "a.html")], "--target 'neutral': not a label of this model"),
        (["head-importance", "--model", made["clf"], "--validation_file", missing], "no such file"),
    ]


def test_a_user_error_exits_2_with_one_line_in_every_command(made, tmp_path, capsys):
    from npbert.cli import COMMANDS
    cases = user_errors(made, tmp_path)
    assert {argv[0].replace("-", "_") for argv, _ in cases} == set(COMMANDS)         # every command
    for argv, said in cases:
        status, _, err = run(capsys, *argv)
        line = one_error_line(err)
        assert status == 2 and said in line and "--debug" not in line, (argv, status, line)
        assert line.startswith(f"npbert {argv[0]}: error: ")


def test_a_failure_exits_1(made, tmp_path, capsys):
    """What the command met is wrong: a weights file cut short (a corrupt copy), a malformed line of
    the input; the flags were right."""
    import shutil
    cut = tmp_path / "cut"
    shutil.copytree(made["clf"], cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    os.remove(cut / "manifest.json")
    status, _, err = run(capsys, "predict", "--model", cut, "--input", made["test"], "--output", tmp_path / "o.jsonl")
    assert status == 1 and "model.safetensors" in one_error_line(err)
    bad = write_csv(tmp_path / "bad.csv", [("the king", "1"), ("a", "b", "c")])
    status, _, err = run(capsys, "finetune", "--task", "text-classification", "--model_name_or_path", made["base"],
                         "--train_file", bad, "--output_dir", tmp_path / "f")
    assert status == 1 and "bad.csv:3" in one_error_line(err)


def test_the_subprocess_exit_status_is_the_same():
    proc = run_npbert(["embed", "--model", "/no/such/npbert/dir", "the king"])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no such directory" in proc.stderr


# ---- 19: what a run keeps, and keeping less ------------------------------------------------------------
def test_a_short_fine_tune_keeps_the_final_model_only(made):
    """transformers' default, save_strategy steps every 500 steps: the 3-step run of the fixture
    (without --save_strategy no it would be the same) leaves no checkpoint-N; only the model."""
    out = made["root"] / "short"
    status = main(["finetune", "--task", "text-classification", "--model_name_or_path", made["base"], "--train_file",
                   made["train"], "--output_dir", str(out), "--max_steps", "3", "--plot", "false"])
    assert status == 0
    assert not [n for n in os.listdir(out) if n.startswith("checkpoint-")]
    assert (out / "model.safetensors").is_file()


def test_the_first_save_says_what_is_kept_and_how_large(made, tmp_path, capsys):
    common = ["finetune", "--task", "text-classification", "--model_name_or_path", made["base"], "--train_file",
              made["train"], "--max_steps", "4", "--save_steps", "2", "--plot", "false",
              "--per_device_train_batch_size", "4"]
    model = npbert.BertForSequenceClassification.from_pretrained(made["clf"])
    model_bytes = sum(p.nbytes for _, p in model.named_parameters())
    status, _, err = run(capsys, *common, "--output_dir", tmp_path / "full")
    assert status == 0, err
    said = [line for line in err.splitlines() if line.startswith("checkpoints:")]
    assert len(said) == 1, err                                       # once, at the first save
    kb = lambda n: f"{n / 1e3:.0f} KB" if n >= 1e4 else f"{n / 1e3:.1f} KB"   # noqa: E731 (checkpointing._mb)
    # AdamW keeps two moments per parameter: the optimizer's state is twice the model
    assert f"holds the model ({kb(model_bytes)}) and the optimizer's state ({kb(2 * model_bytes)}) to resume from, " \
           f"about {kb(3 * model_bytes)}; the newest 1 kept (save_total_limit): about {kb(3 * model_bytes)} on disk" \
           in said[0], said[0]
    assert "To keep less: --save_only_model (the model alone, no resuming), or --save_strategy no" in said[0]
    on_disk = sum(os.path.getsize(tmp_path / "full" / "checkpoint-4" / n)
                  for n in ("model.safetensors", "optimizer.safetensors"))
    assert 3 * model_bytes <= on_disk <= 3 * model_bytes + 64_000     # + the two safetensors headers (JSON)
    # --save_only_model: a third of it, and no resuming from it
    status, _, err = run(capsys, *common, "--output_dir", tmp_path / "small", "--save_only_model")
    assert status == 0, err
    assert f"holds the model alone ({kb(model_bytes)}; save_only_model: no resuming from it)" in err
    assert sorted(os.listdir(tmp_path / "small" / "checkpoint-4")) == [
        "config.json", "manifest.json", "model.safetensors", "trainer_state.json", "training_args.json"]
    status, _, err = run(capsys, *common, "--output_dir", tmp_path / "small", "--save_only_model", "--max_steps", "6",
                         "--resume_from_checkpoint")
    line = one_error_line(err)
    assert status == 1 and "checkpoint-4 was saved with save_only_model" in line and "cannot resume" in line


def test_a_signal_saves_what_resuming_needs_even_with_save_only_model(tmp_path):
    """A stop on SIGTERM writes the optimizer's state too, so that the printed resume command works."""
    import signal

    from reliability_helpers import start_npbert
    model = base_model(tmp_path / "base")
    train = write_csv(tmp_path / "train.csv", sentences(64))
    out = tmp_path / "out"
    proc = start_npbert(["finetune", "--task", "text-classification", "--model_name_or_path", model, "--train_file",
                         train, "--output_dir", str(out), "--num_train_epochs", "500", "--save_only_model",
                         "--per_device_train_batch_size", "4", "--logging_steps", "1", "--plot", "false"])
    try:
        for line in proc.stderr:
            if line.startswith("step "):
                break
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=240)[1]
    finally:
        proc.kill()
        proc.wait(timeout=240)
    assert proc.returncode == 128 + signal.SIGTERM, rest
    [checkpoint] = [n for n in os.listdir(out) if n.startswith("checkpoint-")]
    assert (out / checkpoint / "optimizer.safetensors").is_file()
    assert json.load(open(out / checkpoint / "training_args.json"))["save_only_model"] is False
