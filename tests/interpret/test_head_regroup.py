"""head_importance's regrouped path (npbert/interpret/regroup.py) against its per-batch loop.

The examples of batches of varied lengths are run sorted by length, cut to their real tokens, and
their head-mask gradients scaled back to their own batch's mean loss: importance, raw, entropy and
tokens must be those of the per-batch loop (regroup=False) for every head type the plan accepts,
both granularities, one run or several; every case the plan refuses must say so (`path`) and
give the per-batch loop's numbers.  The identity the regrouped path rests on, d L / d xi_h =
sum over (b, f, t) of dA A / xi_h, is checked against the model's own head-mask gradient."""
import numpy as np
import pytest

import npbert
import npbert.interpret as ni
from npbert.interpret import regroup

from interpret_helpers import TINY, rel

pytestmark = pytest.mark.usefixtures("npbert_path")

# float64: the two paths compute the same sums on arrays of other shapes (other BLAS blocking and
# summation order), ~1e-15 relative per op; 1e-10 leaves room for that and catches any wrong weight
# or missing example (1e-2 or more: one example is ~1/20 of a batch's gradient here).
REL64 = 1e-10


def model_of(cls_name, dtype=np.float64, **overrides):
    config = npbert.BertConfig(**{**TINY, **overrides})
    return getattr(npbert, cls_name)(config, seed=5, dtype=dtype).eval()


def batches(kind, seed=0, sizes=(3, 5, 2, 4, 6), left=False):
    """Batches of random examples (lengths 3..9, [CLS] 2 ... [SEP] 3, a second segment), padded to
    their own longest, with labels of `kind`: "class" (3 classes, one -100), "regression",
    "multilabel" (3), "token" (3 classes, -100 on padding and on some tokens), "mlm", "span"."""
    rng = np.random.default_rng(seed)
    out = []
    for B in sizes:
        lengths = rng.integers(3, 10, size=B)
        T = int(lengths.max())
        ids = np.zeros((B, T), dtype=np.int64)
        types = np.zeros((B, T), dtype=np.int64)
        mask = np.zeros((B, T), dtype=np.int64)
        for b, n in enumerate(lengths):
            cols = slice(T - n, T) if left else slice(0, n)
            ids[b, cols] = np.concatenate([[2], rng.integers(4, TINY["vocab_size"], size=n - 2), [3]])
            types[b, cols] = np.arange(n) >= n // 2
            mask[b, cols] = 1
        batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if kind == "class":
            batch["labels"] = rng.integers(0, 3, size=B)
        elif kind == "regression":
            batch["labels"] = rng.normal(size=B)
        elif kind == "multilabel":
            batch["labels"] = rng.integers(0, 2, size=(B, 3)).astype(np.float64)
        elif kind in ("token", "mlm"):
            labels = rng.integers(0, 3 if kind == "token" else TINY["vocab_size"], size=(B, T))
            labels[(mask == 0) | (rng.random((B, T)) < 0.3)] = -100
            labels[:, 0] = rng.integers(0, 3)                  # every example has a label
            batch["labels"] = labels
        else:
            batch["start_positions"] = rng.integers(0, lengths)
            batch["end_positions"] = rng.integers(0, lengths)
        out.append(batch)
    if kind == "class":
        out[1]["labels"][2] = -100                             # cross-entropy skips it: counts 4 of 5
    return out


def assert_same(got, ref, tol):
    assert rel(got.raw, ref.raw) <= tol
    assert rel(got.importance, ref.importance) <= tol
    assert rel(got.entropy, ref.entropy) <= tol
    assert got.tokens == ref.tokens


CASES = [("BertForSequenceClassification", "class", {"num_labels": 3}),
         ("BertForSequenceClassification", "regression", {"num_labels": 1}),
         ("BertForSequenceClassification", "multilabel", {"num_labels": 3}),
         ("BertForTokenClassification", "token", {"num_labels": 3}),
         ("BertForMaskedLM", "mlm", {})]


@pytest.mark.parametrize("granularity", ["batch", "token"])
@pytest.mark.parametrize("cls_name,kind,overrides", CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("budget", [regroup.RUN_TOKENS, 1], ids=["one run", "several runs"])
def test_regrouped_equals_the_per_batch_loop(monkeypatch, cls_name, kind, overrides, granularity, budget):
    """budget 1: the runs are as long as the largest batch's B T (40 to 54 tokens of ~100)."""
    monkeypatch.setattr(regroup, "RUN_TOKENS", budget)
    model, data = model_of(cls_name, **overrides), batches(kind)
    plan = regroup.plan_runs(model, data)
    assert (len(plan.runs) == 1) == (budget > 1)
    got = ni.head_importance(model, data, granularity=granularity)
    ref = ni.head_importance(model, data, granularity=granularity, regroup=False)
    assert got.path == "regrouped" and ref.path == "per batch: regroup=False"
    assert ref.tokens == sum(int(b["attention_mask"].sum()) for b in data)
    assert_same(got, ref, REL64)


def test_regrouped_equals_at_a_head_mask_without_zeros():
    model, data = model_of("BertForSequenceClassification", num_labels=3), batches("class")
    hm = np.random.default_rng(1).uniform(0.5, 1.5, size=(2, 4))
    for granularity in ("batch", "token"):
        got = ni.head_importance(model, data, granularity=granularity, head_mask=hm)
        ref = ni.head_importance(model, data, granularity=granularity, head_mask=hm, regroup=False)
        assert got.path == "regrouped"
        assert_same(got, ref, REL64)


def test_regrouped_equals_in_float32():
    """float32: the runs' GEMMs round differently from the batches' (~6e-8 per op; measured 2.5e-7 of
    the largest through two layers and the backward); 1e-5 leaves 40x room and catches a wrong
    weight (1e-2)."""
    model, data = model_of("BertForTokenClassification", dtype=np.float32, num_labels=3), batches("token")
    got = ni.head_importance(model, data)
    ref = ni.head_importance(model, data, regroup=False)
    assert got.path == "regrouped"
    assert_same(got, ref, 1e-5)


def _left_padded():
    return batches("class", left=True)


def _holes():
    data = batches("class")
    data[2]["attention_mask"][0, 1] = 0
    return data


def _labels_on_padding():
    data = batches("token")
    b = next(b for b in data if (b["attention_mask"] == 0).any())
    b["labels"][b["attention_mask"] == 0] = 1
    return data


def _unknown_key():
    return [{**b, "output_hidden_states": True} for b in batches("class")]       # the model takes it


def _mixed_dtypes():
    data = batches("class")
    data[1]["labels"] = data[1]["labels"].astype(np.int32)
    return data


FALLBACKS = [
    ("left padding", "BertForSequenceClassification", {"num_labels": 3}, _left_padded, "not a prefix of ones"),
    ("mask with a hole", "BertForSequenceClassification", {"num_labels": 3}, _holes, "not a prefix of ones"),
    ("labels on padding", "BertForTokenClassification", {"num_labels": 3}, _labels_on_padding,
     "labels other than -100 on padded tokens"),
    ("unknown key", "BertForSequenceClassification", {"num_labels": 3}, _unknown_key, "output_hidden_states"),
    ("mixed dtypes", "BertForSequenceClassification", {"num_labels": 3}, _mixed_dtypes, "int32"),
    ("question answering", "BertForQuestionAnswering", {}, lambda: batches("span"), "BertForQuestionAnswering"),
]


@pytest.mark.parametrize("case,cls_name,overrides,make,reason", FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_what_cannot_be_regrouped_runs_batch_by_batch(case, cls_name, overrides, make, reason):
    model, data = model_of(cls_name, **overrides), make()
    assert isinstance(regroup.plan_runs(model, data), str)
    got = ni.head_importance(model, data)
    assert got.path.startswith("per batch: ") and reason in got.path, got.path
    ref = ni.head_importance(model, data, regroup=False)
    assert_same(got, ref, 0.0)                           # the same loop: equal bit for bit


def test_a_head_mask_with_zeros_runs_batch_by_batch():
    model, data = model_of("BertForSequenceClassification", num_labels=3), batches("class")
    hm = np.ones((2, 4))
    hm[1, 2] = 0.0
    got = ni.head_importance(model, data, head_mask=hm)
    assert got.path.startswith("per batch: a head_mask with zeros")
    assert_same(got, ni.head_importance(model, data, head_mask=hm, regroup=False), 0.0)


def test_pretraining_runs_batch_by_batch():
    model = model_of("BertForPreTraining")
    data = batches("mlm")
    for b in data:
        b["next_sentence_label"] = np.zeros(len(b["input_ids"]), dtype=np.int64)
    got = ni.head_importance(model, data)
    assert got.path.startswith("per batch: BertForPreTraining")
    assert_same(got, ni.head_importance(model, data, regroup=False), 0.0)


def test_question_answering_loss_depends_on_the_padding():
    """Why QA is not regrouped: its start/end cross-entropy runs over every position, padding
    included, so one example's loss changes when it is padded further."""
    model = model_of("BertForQuestionAnswering")
    b = batches("span", sizes=(1,))[0]
    T = b["input_ids"].shape[1]
    padded = {k: (np.pad(v, ((0, 0), (0, 3))) if v.ndim == 2 else v) for k, v in b.items()}
    assert padded["input_ids"].shape[1] == T + 3
    assert abs(float(model(**padded).loss) - float(model(**b).loss)) > 1e-3 * abs(float(model(**b).loss))


@pytest.mark.parametrize("with_mask", [False, True], ids=["no head_mask", "head_mask"])
def test_per_example_shares_sum_to_the_head_mask_gradient(with_mask):
    """sum over b of sum over (f, t) of dA[b,h,f,t] A[b,h,f,t] / xi_h = d L / d xi_h (dropout off)."""
    model, batch = model_of("BertForSequenceClassification", num_labels=3), batches("class")[1]
    hm = np.random.default_rng(2).uniform(0.5, 1.5, size=(2, 4)) if with_mask else None
    out = model(**batch, head_mask=hm, output_attentions=True)
    _, igrads = model.backward(return_intermediate_grads=True)
    for layer, (A, dA) in enumerate(zip(out.attentions, igrads.attentions)):
        xi = np.ones(4) if hm is None else hm[layer]
        shares = np.einsum("bnft,bnft->bn", dA, A) / xi                        # (B, N)
        assert rel(shares.sum(axis=0), igrads.head_mask[layer]) < 1e-12    # one sum in two orders
        assert np.abs(shares).max() > 1e-3 * np.abs(igrads.head_mask[layer]).max()


def test_progress_counts_the_batches(monkeypatch):
    monkeypatch.setattr(regroup, "RUN_TOKENS", 1)
    model, data = model_of("BertForSequenceClassification", num_labels=3), batches("class")
    for flag in (True, False):
        calls = []
        ni.head_importance(model, data, regroup=flag, progress=lambda *a: calls.append(a))
        done = [c[0] for c in calls]
        assert all(c[1] == len(data) for c in calls) and done == sorted(done) and done[-1] == len(data)
        assert calls[-1][3].endswith(f"{sum(len(b['labels']) for b in data)}/{sum(len(b['labels']) for b in data)}"
                                     f" examples")
        assert len(calls) > 1


EVALUATED = [("BertForSequenceClassification", "class", {"num_labels": 3}, True),      # -100 dropped below
             ("BertForSequenceClassification", "regression", {"num_labels": 1}, True),
             ("BertForSequenceClassification", "class", {"num_labels": 3}, False),     # one -100: counts 0
             ("BertForTokenClassification", "token", {"num_labels": 3}, False)]


@pytest.mark.parametrize("cls_name,kind,overrides,regrouped", EVALUATED,
                         ids=["class", "regression", "class with -100", "token"])
def test_evaluate_regroups_only_when_every_example_counts_once(monkeypatch, cls_name, kind, overrides, regrouped):
    """Regrouped, the loss is the sum over runs of (run loss x run size): the same sum when each
    example is one element of its batch's mean; otherwise evaluate runs the batches (a spy on
    Plan.inputs tells which)."""
    monkeypatch.setattr(regroup, "RUN_TOKENS", 1)
    runs = []
    inputs = regroup.Plan.inputs
    monkeypatch.setattr(regroup.Plan, "inputs", lambda self, k: runs.append(k) or inputs(self, k))
    model, data = model_of(cls_name, **overrides), batches(kind)
    if regrouped and kind == "class":
        data[1]["labels"][2] = 0
    hm = np.ones((2, 4))
    hm[0, 1] = 0.0                                     # a pruned head: no gradient here, nothing divides by xi
    loss, accuracy = ni.evaluate(model, data, head_mask=hm)
    assert bool(runs) == regrouped
    ref_loss, ref_accuracy = ni.evaluate(model, data, head_mask=hm, regroup=False)
    assert abs(loss - ref_loss) <= REL64 * abs(ref_loss)
    assert accuracy == ref_accuracy and (accuracy is None) == (kind != "class")
