"""docs/custom_heads.md's BertForMeanPooledRegression, a head npbert does not know, through every
feature with nothing in npbert changed for it: its backward against finite differences on both
paths, the Trainer (and a resume, bit for bit), `mpiexec -n 2` against one process, save/load,
integrated gradients and head importance.  (The page's own blocks run in test_docs_blocks.py.)"""
import importlib.util
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import npbert
import npbert.interpret
from npbert.gradcheck import check_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import custom_head_example as ex  # noqa: E402

BertForMeanPooledRegression = ex.example_class()


def model_and_batch(dropout=0.1, seed=0):
    config = npbert.BertConfig(**ex.TINY, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    model = BertForMeanPooledRegression(config, dtype=np.float64, seed=seed)
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():              # away from the init, no zero bias hiding a path
        p[...] = (1.0 if name.endswith("LayerNorm.weight") else 0.0) + rng.normal(0.0, 0.5, size=p.shape)
    ids = np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0], [2, 9, 8, 11, 3]])
    batch = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64), "labels": np.array([0.5, -1.0, 2.0])}
    return model, batch


def test_the_example_is_a_model_with_transformers_names():
    model, _ = model_and_batch()
    names = [n for n, _ in model.named_parameters()]
    assert names[-2:] == ["regressor.weight", "regressor.bias"] and names[0] == "bert.embeddings.word_embeddings.weight"
    assert all(n.startswith(("bert.", "regressor.")) for n in names)
    assert "(regressor): Linear(in_features=8, out_features=1, bias=True)" in repr(model)


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_its_backward_equals_finite_differences(path):
    """float64, dropout on (the masks held fixed by check_model): every parameter, sampled entries;
    gradcheck's scale-aware verdict (npbert/gradcheck.py)."""
    with npbert.using_path(path):                       # the model is built on `path`
        model, batch = model_and_batch()
        checks = check_model(model.train(), batch, {"loss": 1.0}, max_entries=4)
    assert model.path == path and set(checks) == set(model.state.params)
    bad = {n: (c.error, c.note) for n, c in checks.items() if not c.ok}
    assert not bad, bad


def test_the_loss_is_the_mean_over_the_batch():
    model, batch = model_and_batch()
    out = model.eval()(**batch)
    assert float(out.loss) == pytest.approx(np.mean((out.logits[:, 0] - batch["labels"]) ** 2), rel=1e-15)


def test_the_trainer_trains_it_and_resumes_bit_for_bit(tmp_path):
    """6 steps (2 micro-batches each, dropout on) saving at step 3; a new Trainer resumed from
    checkpoint-3 ends with the uninterrupted run's parameters, bit for bit."""
    settings = dict(per_device=4, max_steps=6, gradient_accumulation_steps=2, save_strategy="steps", save_steps=3)
    full = ex.make_trainer(str(tmp_path / "run"), **settings)
    full.train()
    resumed = ex.make_trainer(str(tmp_path / "run"), **settings)
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-3"))
    assert resumed.state.global_step == full.state.global_step == 6
    for name, p in full.model.named_parameters():
        assert np.array_equal(p, resumed.model.state.params[name]), name
    start = ex.make_trainer(str(tmp_path / "unused"), **settings).model
    assert any(not np.array_equal(p, start.state.params[n]) for n, p in full.model.named_parameters())


def test_the_trainer_lowers_its_loss(tmp_path):
    """A constant target (every label 1.0): 30 AdamW steps at lr 1e-2 bring the mean squared error
    well down from where a random regressor starts."""
    trainer = ex.make_trainer(str(tmp_path / "o"), per_device=4, max_steps=30, dropout=0.0, logging_steps=1)
    for e in trainer.train_dataset:
        e["labels"] = 1.0
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert losses[-1] < 0.1 * losses[0], losses


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="the mpi extra is not installed")
def test_two_ranks_equal_one_process_with_the_global_batch(tmp_path):
    """mpiexec -n 2 with 2 examples per rank against one process with 4, float64, dropout 0.1:
    the same rows, masks and per-row arithmetic, summed in another order (each rank, then MPI);
    round-off of a few 1e-16 per step, so 1e-12 of the largest parameter; a wrong normalisation
    or mask moves parameters by ~1e-3 (AdamW's steps are ~lr = 1e-2)."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        pytest.skip("no mpiexec beside this Python")
    cmd = [mpiexec, "-n", "2", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    cmd += [sys.executable, os.path.join(os.path.dirname(ex.__file__), "custom_head_example.py"), str(tmp_path), "2"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "PRTE_"))}
    env["PYTHONPATH"] = ex.ROOT
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ex.ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(tmp_path / "params.npz") as f:
        got = {k: f[k] for k in f.files}
    one = ex.make_trainer(str(tmp_path / "one"), per_device=4)
    result = one.train()
    # relative to the model's largest parameter: key.bias's gradient is 0 in exact arithmetic (the
    # softmax does not see it), so it holds round-off alone, ~1e-16, on both sides
    scale = max(float(np.max(np.abs(v))) for v in one.model.state_dict().values())
    for name, want in one.model.state_dict().items():
        assert float(np.max(np.abs(got[name] - want))) <= 1e-12 * scale, name
    assert abs(float(got["training_loss"]) - result.training_loss) <= 1e-12 * abs(result.training_loss)


def test_save_and_load_round_trip(tmp_path):
    model, batch = model_and_batch()
    model.save_pretrained(tmp_path / "m")
    again = BertForMeanPooledRegression.from_pretrained(tmp_path / "m", dtype=np.float64)
    for name, value in model.state_dict().items():
        assert np.array_equal(again.state_dict()[name], value), name
    assert np.array_equal(again(**batch).logits, model.eval()(**batch).logits)
    npbert.BertModel(model.config).save_pretrained(tmp_path / "base")       # a plain BERT checkpoint
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BertForMeanPooledRegression.from_pretrained(tmp_path / "base")
    assert any("newly initialized" in str(w.message) and "regressor.weight" in str(w.message) for w in caught)


def test_integrated_gradients_add_up_to_the_change_of_its_output():
    """Completeness: the attributions of logits[:, 0] sum to F(x) - F(x') up to the quadrature's
    error, which return_convergence_delta reports; 64 Gauss-Legendre points on this smooth
    path leave |delta| below 1e-6 of |F(x) - F(x')| (a wrong gradient is off by O(1))."""
    model, batch = model_and_batch(dropout=0.0)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    inputs["special_tokens_mask"] = np.isin(batch["input_ids"], [0, 2, 3]).astype(np.int64)
    attr = npbert.interpret.integrated_gradients(model.eval(), inputs, target=0, n_steps=64,
                                                 return_convergence_delta=True)
    delta = attr.convergence_delta
    assert attr.attributions.shape == (3, 5, 8)
    total = attr.attributions.reshape(3, -1).sum(axis=1)
    change = total - np.asarray(delta)                      # captum: delta = sum(attr) - (F(x) - F(x'))
    assert np.all(np.abs(delta) <= 1e-6 * np.abs(change)), (delta, change)
    with pytest.raises(ValueError, match="out of range"):
        npbert.interpret.integrated_gradients(model, inputs, target=1, n_steps=4)   # logits has one column


def test_head_importance_is_the_gradient_of_the_loss_by_each_heads_mask():
    """bertology's importance of head h in layer l: |d loss / d head_mask[l, h]| at head_mask = 1,
    here against central finite differences in float64 (step 1e-5: error ~1e-10)."""
    model, batch = model_and_batch(dropout=0.0)
    model.eval()
    got = npbert.interpret.head_importance(model, [batch], normalize_importance_by_layer=False)
    L, N = 2, 2
    fd = np.zeros((L, N))
    for layer in range(L):
        for head in range(N):
            e = np.zeros((L, N))
            e[layer, head] = 1e-5
            up = float(model(**batch, head_mask=np.ones((L, N)) + e).loss)
            down = float(model(**batch, head_mask=np.ones((L, N)) - e).loss)
            fd[layer, head] = abs(up - down) / 2e-5
    raw = got.raw * got.tokens if np.ndim(got.tokens) == 0 else got.raw
    ratio = raw / fd
    assert np.allclose(ratio, ratio.flat[0], rtol=1e-6), (raw, fd)      # the same up to its normalisation
    assert "does not declare regroup_kind" in got.path                       # no regrouping for an unknown head
