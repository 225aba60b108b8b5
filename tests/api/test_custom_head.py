"""docs/custom_heads.md's two heads, which npbert does not know, through every feature with nothing
in npbert changed for them and nothing private imported: BertForMeanPooledRegression (one loss
term, a mean over the examples) and BertForSentenceAndTags (outputs of its own names, a loss of two
terms over different counts).  Their backward against torch autograd on a twin with the same
weights and against finite differences, the Trainer (and a resume, bit for bit), `mpiexec -n 2`
against one process, save/load, attributions against captum, head importance against torch.
(The page's own blocks run in test_docs_blocks.py.)

Tolerances: against torch in float64, REL_TOL = 1e-9 relative (head_helpers.py says why: both sides
compute the same float64 expressions in another order, ~1e-13; a wrong term is off by 1e-2 or more).
"""
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "heads"))
import custom_head_example as ex  # noqa: E402
from head_helpers import REL_TOL, assert_close, assert_grads_close, rel  # noqa: E402

EXAMPLES = ["regression", "tags"]
IDS = np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0], [2, 9, 8, 11, 3]])


def model_and_batch(example, dropout=0.1, seed=0):
    """The example model (float64) with random weights away from the init, and a batch of 3."""
    model = ex.make_model(example, dropout, seed)
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():              # away from the init, no zero bias hiding a path
        p[...] = (1.0 if name.endswith("LayerNorm.weight") else 0.0) + rng.normal(0.0, 0.5, size=p.shape)
    batch = {"input_ids": IDS, "attention_mask": (IDS > 0).astype(np.int64)}
    if example == "regression":
        batch["labels"] = np.array([0.5, -1.0, 2.0])
    else:
        batch["labels"] = np.array([1, 0, 1])
        batch["tags"] = np.array([[-100, 0, 2, -100, -100], [-100, 1, -100, -100, -100], [-100, 2, 2, 0, -100]])
    return model, batch


# ---- the torch twins: the page's heads written in torch on transformers' BertModel ------------------
def torch_twin(example, model):
    """The same head in torch (float64, eval), with the npbert model's weights."""
    import torch
    import transformers

    d = model.config.to_dict()
    d.pop("architectures", None)
    config = transformers.BertConfig(**d, attn_implementation="eager")

    class MeanPooledRegression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config, add_pooling_layer=False)
            self.dropout = torch.nn.Dropout(config.hidden_dropout_prob)
            self.regressor = torch.nn.Linear(config.hidden_size, 1)

        def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, labels=None):
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds).last_hidden_state
            m = attention_mask[:, :, None].to(h.dtype)
            logits = self.regressor(self.dropout((h * m).sum(1) / m.sum(1)))
            loss = None if labels is None else torch.nn.functional.mse_loss(logits.squeeze(-1), labels)
            return {"loss": loss, "logits": logits}

    class SentenceAndTags(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config)
            self.sentence_dropout = torch.nn.Dropout(config.hidden_dropout_prob)
            self.sentence_classifier = torch.nn.Linear(config.hidden_size, config.num_labels)
            self.tag_dropout = torch.nn.Dropout(config.hidden_dropout_prob)
            self.tagger = torch.nn.Linear(config.hidden_size, ex.NUM_TAGS)

        def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, labels=None, tags=None):
            o = self.bert(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds)
            sentence_logits = self.sentence_classifier(self.sentence_dropout(o.pooler_output))
            tag_logits = self.tagger(self.tag_dropout(o.last_hidden_state))
            loss = None
            if labels is not None:
                ce = torch.nn.functional.cross_entropy
                loss = ce(sentence_logits, labels) + 0.5 * ce(tag_logits.reshape(-1, ex.NUM_TAGS), tags.reshape(-1))
            return {"loss": loss, "sentence_logits": sentence_logits, "tag_logits": tag_logits}

    twin = (MeanPooledRegression() if example == "regression" else SentenceAndTags()).to(torch.float64)
    state = {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}
    missing, unexpected = twin.load_state_dict(state, strict=True)
    assert not missing and not unexpected
    return twin.eval()


def tensors(batch):
    import torch
    return {k: torch.from_numpy(np.asarray(v)) for k, v in batch.items()}


def key_biases(names):
    """attention.self.key.bias: its gradient is 0 in exact arithmetic (softmax ignores a constant
    added to every score of a row), so both sides hold round-off alone (head_helpers.assert_grads_close)."""
    return {n for n in names if n.endswith("attention.self.key.bias")}


# ---- the loss and its gradients ----------------------------------------------------------------------
@pytest.mark.parametrize("example", EXAMPLES)
def test_backward_is_loss_1_and_equals_torch_autograd(example):
    """backward() after a forward with labels = backward(loss=1) bit for bit = loss.backward()'s .grad,
    and equals torch autograd on the twin (float64, dropout off) within REL_TOL; the loss too."""
    pytest.importorskip("torch")
    model, batch = model_and_batch(example, dropout=0.0)
    model.eval()
    out = model(**batch)
    plain = model.backward(retain_graph=True)
    one = model.backward(loss=1.0, retain_graph=True)
    model.zero_grad()
    out.loss.backward()
    for name, g in plain.items():
        assert np.array_equal(g, one[name]) and np.array_equal(g, model.state.params[name].grad), name
    assert all(np.any(g != 0) for n, g in plain.items() if n not in key_biases(plain)), "a gradient is all zero"
    twin = torch_twin(example, model)
    theirs = twin(**tensors(batch))
    theirs["loss"].backward()
    assert_close(float(out.loss), theirs["loss"].item(), "loss")
    grads = {n: p.grad.numpy() for n, p in twin.named_parameters()}
    assert_grads_close({n: plain[n] for n in grads}, grads, zero=key_biases(grads))


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_loss_terms_are_counted_where_the_mean_is_taken(example):
    model, batch = model_and_batch(example)
    model(**batch)
    declared = {t.name: t.count for t in model.loss_terms(batch)}
    assert model.head_loss.counts == declared
    assert declared == ({"regression": 3} if example == "regression" else {"sentence": 3, "tags": 6})


@pytest.mark.parametrize("example", EXAMPLES)
def test_backward_without_labels_raises_and_names_the_upstreams(example):
    model, batch = model_and_batch(example)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    assert out.get("loss") is None and model.head_loss is None
    with pytest.raises(RuntimeError, match=r"computed no loss.*logits="):
        model.backward()
    with pytest.raises(ValueError, match="a gradient for loss was given"):
        model.backward(loss=1.0)
    name = "logits" if example == "regression" else "sentence_logits"
    grads = model.backward(**{name: np.ones_like(out[name])})          # an output's upstream still works
    assert any(np.any(g != 0) for g in grads.values())


def test_loss_scales_scale_each_term():
    """Example 2: backward(loss_scales={sentence: a, tags: b}) = a d sentence + b d (tags / 2)."""
    model, batch = model_and_batch("tags", dropout=0.0)
    model.eval()
    model(**batch)
    both = model.backward(loss_scales={"sentence": 2.0, "tags": -3.0}, retain_graph=True)
    sentence = model.backward(loss_scales={"sentence": 1.0, "tags": 0.0}, retain_graph=True)
    tags = model.backward(loss_scales={"sentence": 0.0, "tags": 1.0})
    for name in both:
        np.testing.assert_allclose(both[name], 2.0 * sentence[name] - 3.0 * tags[name], rtol=1e-12,
                                   atol=1e-14 * (1 + np.abs(both[name]).max()))
    model(**batch)
    with pytest.raises(ValueError, match=r"has the terms \['sentence', 'tags'\]"):
        model.backward(loss_scales={"sentence": 1.0})


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_its_backward_equals_finite_differences(example, path):
    """float64, dropout on (the masks held fixed by check_model): every parameter, sampled entries;
    gradcheck's scale-aware verdict (npbert/gradcheck.py)."""
    with npbert.using_path(path):                       # the model is built on `path`
        model, batch = model_and_batch(example)
        checks = check_model(model.train(), batch, {"loss": 1.0}, max_entries=4)
    assert model.path == path and set(checks) == set(model.state.params)
    bad = {n: (c.error, c.note) for n, c in checks.items() if not c.ok}
    assert not bad, bad


def test_the_regression_loss_is_the_mean_over_the_batch():
    model, batch = model_and_batch("regression")
    out = model.eval()(**batch)
    assert float(out.loss) == pytest.approx(np.mean((out.logits[:, 0] - batch["labels"]) ** 2), rel=1e-15)


def test_its_own_output_reads_as_transformers_outputs():
    model, batch = model_and_batch("tags")
    out = model.eval()(**batch)
    assert type(out).__name__ == "SentenceAndTagsOutput" and list(out) == ["loss", "sentence_logits", "tag_logits"]
    assert out.tag_logits is out["tag_logits"] is out[2] is out.to_tuple()[2] and out.get("attentions") is None
    assert out.sentence_logits.shape == (3, 2) and out.tag_logits.shape == (3, 5, ex.NUM_TAGS)
    again = model(**batch, return_dict=False)
    assert len(again) == 3 and np.array_equal(again[2], out.tag_logits)


# ---- training ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", EXAMPLES)
def test_the_trainer_trains_it_and_resumes_bit_for_bit(example, tmp_path):
    """6 steps (2 micro-batches each, dropout on) saving at step 3; a new Trainer resumed from
    checkpoint-3 ends with the uninterrupted run's parameters, bit for bit."""
    settings = dict(per_device=4, max_steps=6, gradient_accumulation_steps=2, save_strategy="steps", save_steps=3,
                    example=example)
    full = ex.make_trainer(str(tmp_path / "run"), **settings)
    full.train()
    resumed = ex.make_trainer(str(tmp_path / "run"), **settings)
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-3"))
    assert resumed.state.global_step == full.state.global_step == 6
    for name, p in full.model.named_parameters():
        assert np.array_equal(p, resumed.model.state.params[name]), name
    start = ex.make_model(example)
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


def rank_tag_counts(per_device=4, world=2, seed=42):
    """The tags each rank holds in the first step: the Trainer's epoch-0 order, cut into ranks."""
    order = np.random.default_rng([seed, 0]).permutation(13)
    data = ex.dataset("tags")
    return [int(sum((data[i]["tags"] != -100).sum() for i in order[r * per_device:(r + 1) * per_device]))
            for r in range(world)]


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="the mpi extra is not installed")
@pytest.mark.parametrize("example", EXAMPLES)
def test_two_ranks_equal_one_process_with_the_global_batch(example, tmp_path):
    """mpiexec -n 2 with 4 examples per rank against one process with 8, float64, dropout 0.1:
    the same rows, masks and per-row arithmetic, summed in another order (each rank, then MPI);
    round-off of a few 1e-16 per step, so 1e-12 of the largest parameter; a wrong normalisation
    or mask moves parameters by ~1e-3 (AdamW's steps are ~lr = 1e-2).  For the tags example the
    two ranks hold different numbers of tags, so a per-rank mean of the tag term would differ."""
    from npbert.training import TrainingArguments
    assert TrainingArguments("unused").seed == 42
    if example == "tags":
        counts = rank_tag_counts()
        assert counts[0] != counts[1], counts
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        pytest.skip("no mpiexec beside this Python")
    cmd = [mpiexec, "-n", "2", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    cmd += [sys.executable, os.path.join(os.path.dirname(ex.__file__), "custom_head_example.py"), str(tmp_path), "4",
            example]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "PRTE_"))}
    env["PYTHONPATH"] = ex.ROOT
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ex.ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(tmp_path / "params.npz") as f:
        got = {k: f[k] for k in f.files}
    one = ex.make_trainer(str(tmp_path / "one"), per_device=8, example=example)
    result = one.train()
    # relative to the model's largest parameter: key.bias's gradient is 0 in exact arithmetic (the
    # softmax does not see it), so it holds round-off alone, ~1e-16, on both sides
    scale = max(float(np.max(np.abs(v))) for v in one.model.state_dict().values())
    for name, want in one.model.state_dict().items():
        assert float(np.max(np.abs(got[name] - want))) <= 1e-12 * scale, name
    assert abs(float(got["training_loss"]) - result.training_loss) <= 1e-12 * abs(result.training_loss)


@pytest.mark.parametrize("example", EXAMPLES)
def test_save_and_load_round_trip(example, tmp_path):
    model, batch = model_and_batch(example)
    cls = type(model)
    model.save_pretrained(tmp_path / "m")
    again = cls.from_pretrained(tmp_path / "m", dtype=np.float64)
    for name, value in model.state_dict().items():
        assert np.array_equal(again.state_dict()[name], value), name
    assert float(again(**batch).loss) == float(model.eval()(**batch).loss)
    npbert.BertModel(model.config).save_pretrained(tmp_path / "base")       # a plain BERT checkpoint
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cls.from_pretrained(tmp_path / "base")
    head = "regressor.weight" if example == "regression" else "tagger.weight"
    assert any("newly initialized" in str(w.message) and head in str(w.message) for w in caught)


# ---- attributions and head importance ------------------------------------------------------------------
TARGETS = [("regression", ("logits", 0), "logits", 0), ("tags", ("sentence_logits", 1), "sentence_logits", 1),
           ("tags", ("tag_logits", 2, 0), "tag_logits", (2, 0))]


@pytest.mark.parametrize("example, target, output, captum_target", TARGETS)
def test_integrated_gradients_on_each_output_equal_captums(example, target, output, captum_target):
    """LayerIntegratedGradients on the embeddings, npbert's default baseline ([CLS] ... [SEP] kept,
    the rest [PAD]) given to both; captum's float32 points and weights (captum_rounding=True)."""
    captum_attr = pytest.importorskip("captum.attr")
    import torch
    model, batch = model_and_batch(example, dropout=0.0)
    model.eval()
    inputs = {"input_ids": IDS, "attention_mask": batch["attention_mask"],
              "special_tokens_mask": np.isin(IDS, [0, 2, 3]).astype(np.int64)}
    ours = npbert.interpret.integrated_gradients(model, inputs, target=target, n_steps=4, captum_rounding=True,
                                                 return_convergence_delta=True)
    twin = torch_twin(example, model)
    baseline = npbert.interpret.default_baseline_ids(model, inputs, inputs["special_tokens_mask"].astype(bool))

    def forward(input_ids, attention_mask):
        return twin(input_ids=input_ids, attention_mask=attention_mask)[output]
    lig = captum_attr.LayerIntegratedGradients(forward, twin.bert.embeddings)
    theirs, delta = lig.attribute(torch.from_numpy(IDS), baselines=torch.from_numpy(baseline),
                                  additional_forward_args=(torch.from_numpy(batch["attention_mask"]),),
                                  target=captum_target, n_steps=4, return_convergence_delta=True)
    assert ours.attributions.shape == tuple(theirs.shape)
    assert rel(ours.attributions, theirs.detach().numpy()) < REL_TOL
    assert np.abs(ours.convergence_delta - delta.numpy()).max() < 1e-10
    assert np.abs(ours.attributions).max() > 0


def test_a_target_past_an_output_is_refused():
    model, batch = model_and_batch("tags")
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with pytest.raises(ValueError, match="out of range for axis 2 of tag_logits"):
        npbert.interpret.saliency(model.eval(), inputs, target=("tag_logits", 2, 7))
    with pytest.raises(ValueError, match="has no output 'tags_logits'"):
        npbert.interpret.saliency(model.eval(), inputs, target=("tags_logits", 2, 0))


@pytest.mark.parametrize("example", EXAMPLES)
def test_head_importance_is_torchs_gradient_of_the_loss_by_each_heads_mask(example):
    """bertology's importance of head h in layer l: |d loss / d head_mask[l, h]| at head_mask = 1,
    against torch autograd on the twin (float64); non-zero, the same up to npbert's per-token
    normalisation (one constant for a batch)."""
    pytest.importorskip("torch")
    import torch
    model, batch = model_and_batch(example, dropout=0.0)
    model.eval()
    got = npbert.interpret.head_importance(model, [batch], normalize_importance_by_layer=False)
    twin = torch_twin(example, model)
    mask = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    N = model.config.num_attention_heads

    def scale_heads(layer):             # head_mask (gone from transformers 5): xi scales a head's context,
        def hook(module, args, output):  # (p xi) @ v = xi (p @ v)
            context = output[0]
            B, T, H = context.shape
            scaled = (context.reshape(B, T, N, H // N) * mask[layer][None, None, :, None]).reshape(B, T, H)
            return (scaled,) + tuple(output[1:])
        return hook
    hooks = [layer.attention.self.register_forward_hook(scale_heads(i)) for i, layer in enumerate(twin.bert.encoder.layer)]
    twin(**tensors(batch))["loss"].backward()
    for h in hooks:
        h.remove()
    want = mask.grad.abs().numpy()
    raw = got.raw * got.tokens if np.ndim(got.tokens) == 0 else got.raw
    assert np.all(want > 0) and np.all(raw > 0)
    ratio = raw / want
    assert np.allclose(ratio, ratio.flat[0], rtol=1e-9), (raw, want)
    assert "does not say that cutting off the padding" in got.path             # no regrouping for an unknown head
