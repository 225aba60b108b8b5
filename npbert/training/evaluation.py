"""The Trainer's evaluation: the prediction loop over a dataset (sharded over the ranks under
mpiexec and gathered in the one-process order), evaluate() and predict() as transformers'
Trainer has them, and the best-model / early-stopping bookkeeping that reads their metrics.
A mixin of npbert.training.trainer.Trainer (which holds the model, args, datasets, state)."""
import time

import numpy as np

from npbert import distributed as dist
from npbert.modeling import no_grad

from .trainer_state import EvalPrediction, PredictionOutput

_NOT_PREDICTIONS = ("loss", "hidden_states", "attentions", "past_key_values", "cross_attentions")


def _nested_concat(a, b, padding_index=-100):
    """Concatenate along the batch axis; arrays whose axis 1 differs are padded with -100 (transformers)."""
    if a is None:
        return b
    if isinstance(a, tuple):
        return tuple(_nested_concat(x, y, padding_index) for x, y in zip(a, b))
    if a.ndim < 2 or a.shape[1:] == b.shape[1:]:
        return np.concatenate([a, b], axis=0)
    shape = (a.shape[0] + b.shape[0], max(a.shape[1], b.shape[1])) + a.shape[2:]
    out = np.full(shape, padding_index, dtype=np.result_type(a, b))
    out[:a.shape[0], :a.shape[1]] = a
    out[a.shape[0]:, :b.shape[1]] = b
    return out


class Evaluation:
    # ---- evaluation ---------------------------------------------------------------------------
    def _prediction_loop(self, dataset, prefix, ignore_keys=None):
        if dataset is None:
            raise ValueError(f"{prefix}: no dataset to evaluate (pass eval_dataset)")
        model, bs = self.model, self.args.per_device_eval_batch_size
        was_training = model.training
        model.eval()
        t0 = time.perf_counter()
        n = len(dataset)
        parts = []                                  # per batch: (predictions, labels, loss x rows, rows)
        try:
            # one process's batches of bs; on N ranks, a contiguous run of them each
            batches = dist.eval_batches(n, bs, self.world.world_size, self.world.rank)
            for idx in batches:
                batch = self._collate(dataset, idx, prefix)
                with no_grad():
                    out = model(**batch)
                loss = float(out["loss"]) * len(idx) if out.get("loss") is not None else None
                logits = tuple(v for k, v in out.items() if k not in _NOT_PREDICTIONS and k not in (ignore_keys or ()))
                logits = logits[0] if len(logits) == 1 else logits
                if self.preprocess_logits_for_metrics is not None:
                    logits = self.preprocess_logits_for_metrics(logits, batch.get(self.label_names[0]) if self.label_names else None)
                found = tuple(batch[k] for k in self.label_names if k in batch)
                parts.append((logits, (found[0] if len(found) == 1 else found) if found else None, loss, len(idx)))
        finally:
            model.train(was_training)
        # every rank's batches, in the one-process order, on every rank (one process: its own)
        parts = [p for part in self.world.all_gather_object(list(parts)) for p in part]
        preds, labels, loss_sum, n_loss = None, None, 0.0, 0
        for logits, found, loss, rows in parts:
            preds = _nested_concat(preds, logits)
            if found is not None:
                labels = _nested_concat(labels, found)
            if loss is not None:
                loss_sum += loss
                n_loss += rows
        runtime = time.perf_counter() - t0
        metrics = {}
        if self.compute_metrics is not None and labels is not None:
            for k, v in self.compute_metrics(EvalPrediction(preds, labels)).items():
                metrics[k if k.startswith(prefix + "_") else f"{prefix}_{k}"] = v
        if n_loss:
            metrics[f"{prefix}_loss"] = loss_sum / n_loss
        steps = -(-len(dataset) // bs)
        metrics.update({f"{prefix}_runtime": round(runtime, 4),
                        f"{prefix}_samples_per_second": round(len(dataset) / max(runtime, 1e-9), 3),
                        f"{prefix}_steps_per_second": round(steps / max(runtime, 1e-9), 3)})
        return PredictionOutput(preds, labels, metrics)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        """ignore_keys: output names left out of the predictions (as transformers)."""
        out = self._prediction_loop(eval_dataset if eval_dataset is not None else self.eval_dataset, metric_key_prefix,
                                    ignore_keys)
        entry = {**out.metrics, "epoch": round(self.state.epoch, 4), "step": self.state.global_step}
        self.state.log_history.append(entry)
        if self.progress is not None:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in out.metrics.items()
                              if isinstance(v, float) and not k.endswith(("_runtime", "_per_second")))
            self.progress.message(f"step {self.state.global_step}: {shown}")
        return out.metrics

    def predict(self, test_dataset, ignore_keys=None, metric_key_prefix="test"):
        return self._prediction_loop(test_dataset, metric_key_prefix, ignore_keys)

    # ---- best model, early stopping ------------------------------------------------------------
    def _metric_key(self):
        m = self.args.metric_for_best_model
        return m if m.startswith("eval_") else f"eval_{m}"

    def _track_best(self, metrics):
        """(is this evaluation the best so far, should training stop)."""
        a, st = self.args, self.state
        if a.metric_for_best_model is None:
            return False, False
        key = self._metric_key()
        if key not in metrics:
            raise KeyError(f"metric_for_best_model={a.metric_for_best_model!r}: the evaluation returned "
                           f"{sorted(metrics)}, not {key!r}")
        value = metrics[key]
        better = np.greater if a.greater_is_better else np.less
        improved = st.best_metric is None or (better(value, st.best_metric)
                                              and abs(value - st.best_metric) > a.early_stopping_threshold)
        is_best = st.best_metric is None or better(value, st.best_metric)
        if is_best:
            st.best_metric, st.best_global_step = float(value), st.global_step
        self._patience = 0 if improved else self._patience + 1
        stop = a.early_stopping_patience is not None and self._patience >= a.early_stopping_patience
        if stop:
            self.progress.message(f"early stopping at step {st.global_step}: {key} has not improved for "
                                  f"{self._patience} evaluations (best {st.best_metric:.4g})")
        return is_best, stop
