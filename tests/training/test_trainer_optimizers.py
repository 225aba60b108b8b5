"""The Trainer asks its optimizer, not its arguments, whether the step schedules and clips by itself
(Optimizer.schedules_itself / clips_itself): BertAdam does both, as the tutorials use it, and the
Trainer then adds no schedule and no global clipping, whether it built the BertAdam
(optim="bert_adam") or was given one (optimizers=(opt, None))."""
import numpy as np
import pytest

import npbert
from npbert import optim
from npbert.training import DataCollatorWithPadding, Trainer, TrainingArguments
from training_helpers import classification_dataset, config, tokenizer

STEPS, WARMUP, LR, MAX_NORM = 3, 1, 1e-2, 1e-3


def classifier():
    return npbert.BertForSequenceClassification(config(num_labels=2, hidden_dropout_prob=0.0,
                                                       attention_probs_dropout_prob=0.0), seed=3, dtype=np.float64)


def trained(tmp_path, clips, **kwargs):
    """The parameters after STEPS Trainer steps on examples 0..7 (the same batch each step), and
    the trainer; `clips` counts the Trainer's calls of clip_grad_norm_."""
    tok = tokenizer(tmp_path)
    model = kwargs.pop("model", None) or classifier()
    args = TrainingArguments(str(tmp_path / "out"), max_steps=STEPS, warmup_steps=WARMUP, learning_rate=LR,
                             max_grad_norm=MAX_NORM, per_device_train_batch_size=8, save_strategy="no",
                             plot=False, seed=1, **kwargs.pop("args", {}))
    trainer = Trainer(model, args, train_dataset=classification_dataset(n=8, ragged=False),
                      data_collator=DataCollatorWithPadding(tok), **kwargs)
    trainer._epoch_batches = lambda epoch, n: [np.arange(8)] * STEPS
    trainer.train()
    return {n: p.copy() for n, p in model.named_parameters()}, trainer


@pytest.fixture
def clips(monkeypatch):
    calls = []
    real = optim.clip_grad_norm_

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(optim, "clip_grad_norm_", counting)
    return calls


def by_hand(tmp_path):
    """BertAdam's own loop: its schedule (warmup_linear over t_total = STEPS, warmup 1/3: the
    multipliers 0, 1, 0.5) and its per-parameter clipping, nothing around it."""
    model = classifier()
    groups = optim.optimizer_grouped_parameters(model, weight_decay=0.0, lr=LR)
    opt = optim.BertAdam(groups, lr=LR, warmup=WARMUP / STEPS, t_total=STEPS, schedule="warmup_linear",
                         e=1e-8, max_grad_norm=MAX_NORM)
    batch = DataCollatorWithPadding(tokenizer(tmp_path))(classification_dataset(n=8, ragged=False))
    model.train()
    for _ in range(STEPS):
        model(**batch)
        opt.step(model.backward())
    return {n: p.copy() for n, p in model.named_parameters()}


def test_optim_bert_adam_is_bert_adams_own_loop(tmp_path, clips):
    got, trainer = trained(tmp_path, clips, args=dict(optim="bert_adam"))
    assert isinstance(trainer.optimizer, optim.BertAdam) and trainer.optimizer.schedules_itself
    assert trainer.lr_scheduler.get_last_lr() == [LR] * len(trainer.optimizer.param_groups)   # the base rate
    assert clips == []                                       # no global clipping before its own
    want = by_hand(tmp_path)
    # the same float64 operations in the same order: bit-identical
    assert all(got[n].tobytes() == want[n].tobytes() for n in want), [n for n in want if not np.array_equal(got[n], want[n])]


def test_a_bert_adam_given_to_the_trainer_is_asked_too(tmp_path, clips):
    model = classifier()
    opt = optim.BertAdam(optim.optimizer_grouped_parameters(model, weight_decay=0.0, lr=LR), lr=LR,
                         warmup=WARMUP / STEPS, t_total=STEPS, schedule="warmup_linear", e=1e-8,
                         max_grad_norm=MAX_NORM)
    got, trainer = trained(tmp_path, clips, model=model, optimizers=(opt, None))     # args.optim: "adamw"
    assert trainer.lr_scheduler.get_last_lr() == [LR] * len(opt.param_groups) and clips == []
    want = by_hand(tmp_path)
    assert all(got[n].tobytes() == want[n].tobytes() for n in want)


def test_adamw_gets_the_trainers_schedule_and_clipping(tmp_path, clips):
    _, trainer = trained(tmp_path, clips)
    assert not trainer.optimizer.schedules_itself and not trainer.optimizer.clips_itself
    assert len(clips) == STEPS
    assert trainer.lr_scheduler.get_last_lr()[0] == 0.0                  # linear decay to 0 at max_steps


def test_bert_adam_refuses_a_schedule_it_has_not(tmp_path, clips):
    with pytest.raises(ValueError, match="optim='bert_adam' has the schedules linear, cosine"):
        trained(tmp_path, clips, args=dict(optim="bert_adam", lr_scheduler_type="inverse_sqrt"))
