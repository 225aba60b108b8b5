"""No command writes over what it reads (issue 48, item 1).

Every command with an output flag calls the one check of npbert/cli/outputs.py before any work:
each is run here with an output that is one of its inputs, or a file inside the model folder it
reads, and must stop with exit status 2, one line naming the flag and the path, the shared
check having refused it (a spy around it says so), and every input byte for byte as before.  A
structural test fails when a command gains an output flag without a case here.  The check's
path resolution (symlinks, relative paths, hard links, a folder by another name) and the
outputs it lets through are tested on the function itself."""
import argparse
import hashlib
import importlib
import os
import sys

import pytest

import npbert
from npbert import cli
from npbert.cli import outputs
from npbert.cli.common import UsageError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)                     # weights_tools beside npbert/ (not an installed package)
from weights_tools import convert  # noqa: E402

WORDS = "the a cat dog sat on mat fine good bad day night".split()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny classifier checkpoint with its vocabulary (`model`), a corpus, a labelled csv."""
    root = tmp_path_factory.mktemp("outputs")
    model_dir = root / "model"
    config = npbert.BertConfig(vocab_size=len(WORDS) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=32,
                               id2label={0: "negative", 1: "positive"})
    npbert.BertForSequenceClassification(config, seed=0).save_pretrained(str(model_dir))
    (model_dir / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    (root / "corpus.txt").write_text("the cat sat on the mat\nthe dog sat\n\na fine day\na bad night\n")
    (root / "train.csv").write_text("sentence,label\nthe cat sat,positive\na bad night,negative\n")
    return {"root": str(root), "model": str(model_dir), "corpus": str(root / "corpus.txt"),
            "vocab": str(model_dir / "vocab.txt"), "train": str(root / "train.csv")}


def fingerprint(root):
    """{path: sha256} of every file under root: what the command must leave as it was."""
    found = {}
    for top, _, names in os.walk(root):
        for name in names:
            path = os.path.join(top, name)
            with open(path, "rb") as f:
                found[path] = hashlib.sha256(f.read()).hexdigest()
    return found


# Each command with an output flag: (argv from the files, the flag, the path the error must name).
# The outputs are inputs of the command, or inside the model folder it reads.
CASES = {
    "explain": lambda f: (["explain", "--model", f["model"], "--html", f["model"] + "/config.json"], "--html",
                          f["model"] + "/config.json"),
    "attention": lambda f: (["attention", "--model", f["model"], "--text", "the cat", "--output",
                             f["model"] + "/attention.png"], "--output", f["model"] + "/attention.png"),
    "attribute": lambda f: (["attribute", "--model", f["model"], "--text", "the cat", "--output",
                             f["model"] + "/page.html"], "--output", f["model"] + "/page.html"),
    "head-importance": lambda f: (["head-importance", "--model", f["model"], "--validation_file", f["train"],
                                   "--output_dir", f["model"]], "--output_dir", f["model"]),
    "build-vocab": lambda f: (["build-vocab", "--input_file", f["corpus"], "--vocab_size", "30", "--output_file",
                               f["corpus"]], "--output_file", f["corpus"]),
    "create-pretraining-data": lambda f: (["create-pretraining-data", "--input_file", f["corpus"], "--vocab_file",
                                           f["vocab"], "--output_file", f["vocab"]], "--output_file", f["vocab"]),
    "pretrain": lambda f: (["pretrain", "--train_file", f["corpus"], "--vocab_file", f["vocab"], "--output_dir",
                            f["model"]], "--output_dir", f["model"]),
    "finetune": lambda f: (["finetune", "--task", "text-classification", "--model_name_or_path", f["model"],
                            "--train_file", f["train"], "--output_dir", f["model"]], "--output_dir", f["model"]),
    "predict": lambda f: (["predict", "--model", f["model"], "--input", f["train"], "--output",
                           f["model"] + "/predictions.jsonl"], "--output", f["model"] + "/predictions.jsonl"),
    "weights_tools.convert": lambda f: (["weights_tools.convert", f["model"], f["model"] + "/model.h5"], "DST",
                                        f["model"] + "/model.h5"),
}

# Commands with an output flag that read no file of the user's, so have nothing to write over.
NOTHING_READ = {"demo": "builds its data and models from the text shipped with npbert"}

OUTPUT_DESTS = ("output", "output_file", "output_dir", "html", "dst")
COMMAND_MODULES = [f"npbert.cli.{name}" for name in cli.COMMANDS] + ["weights_tools.convert"]


@pytest.fixture
def spy(monkeypatch):
    """Records each call of the shared check and whether it refused."""
    calls = []
    real = outputs.refuse_overwriting_inputs
    commands = [importlib.import_module(name) for name in COMMAND_MODULES]   # imported before the patch

    def recording(outs, ins):
        try:
            real(outs, ins)
        except UsageError:
            calls.append("refused")
            raise
        calls.append("passed")
    monkeypatch.setattr(outputs, "refuse_overwriting_inputs", recording)
    for module in commands:                          # the commands that imported the check by name
        if getattr(module, "refuse_overwriting_inputs", None) is real:
            monkeypatch.setattr(module, "refuse_overwriting_inputs", recording)
    return calls


@pytest.mark.parametrize("command", sorted(CASES))
def test_each_command_refuses_an_output_that_is_an_input(command, files, spy, capsys):
    argv, flag, path = CASES[command](files)
    before = fingerprint(files["root"])
    if command == "weights_tools.convert":
        status = convert.main(argv[1:])
    else:
        status = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err             # one line, no traceback
    assert f"{flag} {path}" in lines[0] and ": error:" in lines[0], lines[0]
    assert spy == ["refused"], spy                                   # the shared check said it, first and once
    assert fingerprint(files["root"]) == before                       # nothing written, nothing replaced


def subcommands():
    """{command name: its parser} of `npbert`, and weights_tools.convert's."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = dict(sub.choices)
    found["weights_tools.convert"] = convert.build_parser()
    return found


def test_every_command_with_an_output_flag_has_a_case():
    """A command that writes a file (an output flag) is either run above against the shared
    check or listed, with the reason, as reading nothing of the user's."""
    writing = {name for name, p in subcommands().items()
               if any(a.dest in OUTPUT_DESTS for a in p._actions)}
    assert writing == set(CASES) | set(NOTHING_READ), writing ^ (set(CASES) | set(NOTHING_READ))


@pytest.mark.parametrize("module", sorted({"npbert/cli/" + m + ".py" for m in cli.COMMANDS} |
                                          {"weights_tools/convert.py"}))
def test_a_module_that_writes_calls_the_shared_check(module):
    """Every command module that registers an output flag calls refuse_overwriting_inputs (or,
    for predict and convert, a function of its own module that does); none reads a path for
    writing without it."""
    text = open(os.path.join(REPO, module), encoding="utf-8").read()
    has_output_flag = any(f'"--{d}"' in text for d in OUTPUT_DESTS) or '"dst"' in text
    name = os.path.basename(module)[:-3]
    if not has_output_flag or name in NOTHING_READ:
        return
    assert "refuse_overwriting_inputs(" in text, f"{module} has an output flag but does not call the shared check"


# ---- the check itself: how paths are resolved ------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "in.txt").write_text("words")
    return tmp_path


def refused(outs, ins):
    with pytest.raises(UsageError) as e:
        outputs.refuse_overwriting_inputs(outs, ins)
    return str(e.value)


def test_the_same_file_by_a_symlink_a_relative_path_and_a_hard_link(tree, monkeypatch):
    os.symlink(tree / "in.txt", tree / "link.txt")
    os.link(tree / "in.txt", tree / "hard.txt")
    assert "--out" in refused([("--out", str(tree / "link.txt"))], [("--in", str(tree / "in.txt"))])
    monkeypatch.chdir(tree / "model")
    assert "../in.txt" in refused([("--out", "../in.txt")], [("--in", str(tree / "in.txt"))])
    assert "the same file as" in refused([("--out", str(tree / "hard.txt"))], [("--in", str(tree / "in.txt"))])
    # a hard link to a file inside the model folder, from outside it
    os.link(tree / "model" / "config.json", tree / "cfg.json")
    assert "in the --model folder" in refused([("--out", str(tree / "cfg.json"))], [("--model", str(tree / "model"))])


def test_a_model_folder_reached_by_another_name(tree):
    os.symlink(tree / "model", tree / "alias")
    message = refused([("--html", str(tree / "alias" / "new.html"))], [("--model", str(tree / "model"))])
    assert "inside the --model folder" in message and "alias/new.html" in message
    message = refused([("--output_dir", str(tree / "alias"), ("config.json",))], [("--model", str(tree / "model"))])
    assert "is the --model folder" in message
    message = refused([("--output_dir", str(tree / "model" / "sub" / "deeper"), ())], [("--model", str(tree / "alias"))])
    assert "inside the --model folder" in message


def test_an_input_among_what_an_output_folder_receives(tree):
    (tree / "out").mkdir()
    (tree / "out" / "vocab.txt").write_text("x")
    message = refused([("--output_dir", str(tree / "out"), outputs.TRAINING_RUN_ENTRIES)],
                      [("--vocab_file", str(tree / "out" / "vocab.txt"))])
    assert message.startswith(f"--vocab_file {tree / 'out' / 'vocab.txt'} is inside --output_dir") and \
        "writes (or removes) vocab.txt" in message
    (tree / "out" / "checkpoint-5").mkdir()
    assert "checkpoint-5" in refused([("--output_dir", str(tree / "out"), outputs.TRAINING_RUN_ENTRIES)],
                                     [("--model_name_or_path", str(tree / "out" / "checkpoint-5"))])


def test_outputs_that_touch_no_input_pass(tree, monkeypatch):
    """What was valid stays valid: a new file beside the input, an output folder beside the model,
    a data file in the output folder under a name the run does not write, absent paths skipped."""
    check = outputs.refuse_overwriting_inputs
    check([("--out", str(tree / "out.txt"))], [("--in", str(tree / "in.txt")), ("--model", str(tree / "model"))])
    check([("--output_dir", str(tree / "run"), outputs.TRAINING_RUN_ENTRIES)],
          [("--model_name_or_path", str(tree / "model")), ("--train_file", str(tree / "in.txt"))])
    monkeypatch.chdir(tree)                                     # head-importance's default --output_dir "."
    check([("--output_dir", ".", ("head_importance.json",))], [("--validation_file", "in.txt")])
    check([("--out", None)], [("--in", str(tree / "in.txt"))])
    check([("--out", str(tree / "in.txt"))], [("--in", None), ("--gone", str(tree / "absent.txt"))])
    # a model folder whose name starts like the output's folder is another folder
    (tree / "model2").mkdir()
    check([("--out", str(tree / "model2" / "x.html"))], [("--model", str(tree / "model"))])


def test_explain_refuses_the_page_over_its_model_through_a_symlink(files, tmp_path, capsys):
    """The issue's case, by another name: the page path is a symlink to the model's config.json."""
    os.symlink(os.path.join(files["model"], "config.json"), tmp_path / "page.html")
    before = fingerprint(files["model"])
    status = cli.main(["explain", "--model", files["model"], "--html", str(tmp_path / "page.html")])
    err = capsys.readouterr().err
    assert status == 2 and f"--html {tmp_path / 'page.html'}" in err and "--model" in err, err
    assert fingerprint(files["model"]) == before


def test_html_page_refuses_to_write_over_its_tokenizer_folder(files):
    """`npbert explain --html` for a model object (cli/explain.py: html_page) makes the same check
    against the folder it reads the vocabulary from."""
    from npbert.cli.explain import html_page
    model = npbert.BertForSequenceClassification.from_pretrained(files["model"])
    before = fingerprint(files["root"])
    with pytest.raises(UsageError, match=r"^path \S+vocab.txt is inside the tokenizer_dir folder"):
        html_page(files["vocab"], model, tokenizer_dir=files["model"])
    assert fingerprint(files["root"]) == before
