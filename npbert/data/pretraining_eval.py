"""How a pre-trained model is sized and measured, what `npbert pretrain` and `npbert demo` share:
Google's model sizes, the pre-training metrics and baselines, and the rank of a [MASK]'s answer.
(Filling a [MASK] as transformers reports it is the pipeline's: npbert.pipeline("fill-mask").)"""
import numpy as np

from npbert.config import BertConfig
from npbert.modeling import no_grad
from npbert.ops.softmax import log_softmax
from npbert.training import default_data_collator

# google-research/bert's small models (Turc et al. 2019): layers L, hidden H; heads H/64, intermediate 4H.
MODEL_SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}


def config_for_size(size, vocab_size, max_position_embeddings=512, **overrides):
    if size not in MODEL_SIZES:
        raise ValueError(f"model size {size!r}: one of {list(MODEL_SIZES)}")
    L, H = MODEL_SIZES[size]
    return BertConfig(vocab_size=vocab_size, hidden_size=H, num_hidden_layers=L, num_attention_heads=max(1, H // 64),
                      intermediate_size=4 * H, max_position_embeddings=max_position_embeddings, **overrides)


def _log_softmax(x):
    """log softmax over the last axis, in float64.   x: (..., C)"""
    return log_softmax(np.asarray(x, dtype=np.float64))


def preprocess_logits_for_metrics(logits, labels):
    """What the metrics need of each evaluation batch, instead of its (N, T, V) logits:

        rank (N, T) int64     how many tokens score above the right one at a predicted position
                              (0: the top guess is right), -1 where labels is -100
        log_prob (N, T)       log p(the right token) there, 0.0 elsewhere
        nsp_log_probs (N, 2)  log softmax of the next-sentence logits

    logits: (prediction_logits (N, T, V), seq_relationship_logits (N, 2)); labels: (N, T)."""
    mlm, nsp = logits
    labels = np.asarray(labels)
    rank = np.full(labels.shape, -1, dtype=np.int64)
    log_prob = np.zeros(labels.shape)
    chosen = labels != -100                                            # (N, T)
    if chosen.any():
        rows = mlm[chosen].astype(np.float64)                          # (M, V), the predicted positions only
        y = labels[chosen]                                             # (M,)
        right = rows[np.arange(len(y)), y]                             # (M,) the right token's logit
        rank[chosen] = (rows > right[:, None]).sum(axis=-1)
        log_prob[chosen] = _log_softmax(rows)[np.arange(len(y)), y]
    return rank, log_prob, _log_softmax(nsp)


def pretraining_metrics(rank, log_prob, nsp_log_probs, labels, next_sentence_labels):
    """The held-out numbers of pre-training, from preprocess_logits_for_metrics' outputs:

        mlm_accuracy       share of the predicted positions whose top guess is the right token
        mlm_top5_accuracy  ... whose right token is among the 5 best guesses
        mlm_loss           mean -log p(right token) over the predicted positions (nats; the MLM
                           part of the pre-training loss alone)
        nsp_accuracy       share of the pairs whose next-sentence guess is right
        nsp_loss           mean -log p(right next-sentence label)"""
    chosen = np.asarray(labels) != -100
    nsp_labels = np.asarray(next_sentence_labels).reshape(-1)
    out = {}
    if chosen.any():
        r = rank[chosen]
        out.update(mlm_accuracy=float((r == 0).mean()), mlm_top5_accuracy=float((r < 5).mean()),
                   mlm_loss=float(-log_prob[chosen].mean()))
    else:
        out.update(mlm_accuracy=float("nan"), mlm_top5_accuracy=float("nan"), mlm_loss=float("nan"))
    out["nsp_accuracy"] = float((nsp_log_probs.argmax(-1) == nsp_labels).mean())
    out["nsp_loss"] = float(-nsp_log_probs[np.arange(len(nsp_labels)), nsp_labels].mean())
    return out


def compute_pretraining_metrics(eval_pred):
    """The Trainer's compute_metrics for BertForPreTraining (see pretraining_metrics)."""
    (rank, log_prob, nsp_log_probs), (labels, nsp_labels) = eval_pred.predictions, eval_pred.label_ids
    return pretraining_metrics(rank, log_prob, nsp_log_probs, labels, nsp_labels)


def evaluate_pretraining(model, dataset, batch_size=64, mask_token_id=None):
    """pretraining_metrics of `model` on a PretrainingDataset, in eval mode (the mode is restored).

    With mask_token_id, also mlm_accuracy_at_mask: the accuracy over the predicted positions
    whose input is [MASK] (80 % of them), where the model must guess from the context alone; at
    the 10 % left unchanged it can copy its input, at the 10 % replaced it is misled."""
    was = model.training
    model.eval()
    parts = []
    try:
        for start in range(0, len(dataset), batch_size):
            batch = default_data_collator([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            labels, nsp = batch.pop("labels"), batch.pop("next_sentence_label")
            with no_grad():
                out = model(**batch)
            parts.append(preprocess_logits_for_metrics((out.prediction_logits, out.seq_relationship_logits), labels)
                         + (labels, nsp, batch["input_ids"] == mask_token_id))
    finally:
        model.train(was)
    rank, log_prob, nsp_lp, labels, nsp, at_mask = (np.concatenate(k) for k in zip(*parts))
    metrics = pretraining_metrics(rank, log_prob, nsp_lp, labels, nsp)
    if mask_token_id is not None:
        chosen = (labels != -100) & at_mask                            # (N, T)
        metrics["mlm_accuracy_at_mask"] = float((rank[chosen] == 0).mean()) if chosen.any() else float("nan")
    return metrics


def held_out_tokens(dataset):
    """The original token ids at the predicted positions of a PretrainingDataset: (M,) int64,
    the tokens the MLM accuracy and loss are measured on."""
    return np.concatenate([ex["labels"][ex["labels"] != -100] for ex in (dataset[i] for i in range(len(dataset)))])


def unmasked_ids(features):
    """input_ids (N, T) as they were before masking: the original ids put back at the predicted
    positions.  features: the arrays of instances_to_features (input_ids, masked_lm_positions,
    masked_lm_ids, masked_lm_weights)."""
    ids = np.array(features["input_ids"], dtype=np.int64)                          # (N, T), masked
    real = features["masked_lm_weights"] > 0                                        # (N, P)
    rows = np.nonzero(real)[0]                                                      # the row of each prediction
    ids[rows, features["masked_lm_positions"][real]] = features["masked_lm_ids"][real]
    return ids


def unmasked_tokens(features, special_ids):
    """The tokens of the sequences before masking, flattened, without padding and without the ids
    in special_ids ([CLS], [SEP], ...): (M,) int64."""
    ids = unmasked_ids(features)
    return ids[(features["input_mask"] > 0) & ~np.isin(ids, list(special_ids))]


def most_frequent_token_baseline(train_tokens, held_tokens):
    """(accuracy, token id): always guessing the token most frequent in training (ties: the lowest
    id), scored on the held-out predicted tokens; the floor any learning must beat."""
    top = int(np.bincount(np.asarray(train_tokens)).argmax())
    return float((np.asarray(held_tokens) == top).mean()), top


def unigram_entropy(tokens):
    """-sum p log p (nats) of the tokens' frequencies: the MLM loss of a model that knows exactly
    how often each held-out token occurs and nothing about its context (the unigram plateau a
    model must get below to show it uses the context)."""
    counts = np.bincount(np.asarray(tokens))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def nsp_majority(dataset):
    """(accuracy, label) of always guessing the more frequent next-sentence label (0 IsNext,
    1 NotNext; a tie goes to 1)."""
    labels = np.array([int(dataset[i]["next_sentence_label"]) for i in range(len(dataset))])
    not_next = float(labels.mean()) if len(labels) else 0.0
    return (not_next, 1) if not_next >= 0.5 else (1.0 - not_next, 0)


def mask_rank(model, tokenizer, text, answer, top_k=5):
    """(rank, top): the rank of the token `answer` among the model's guesses for the one [MASK]
    of `text` (1: its top guess; ties counted in its favour) and the top_k guessed tokens."""
    if answer not in tokenizer.vocab:
        raise ValueError(f"{answer!r} is not one vocabulary token")
    enc = tokenizer(text, return_tensors="np")
    ids = enc["input_ids"][0]                                           # (T,)
    positions = np.flatnonzero(ids == tokenizer.mask_token_id)
    if len(positions) != 1:
        raise ValueError(f"the text needs exactly one {tokenizer.mask_token}, it has {len(positions)}: {text!r}")
    was = model.training
    model.eval()
    try:
        with no_grad():
            out = model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    finally:
        model.train(was)
    logits = out.logits if "logits" in out else out.prediction_logits
    row = logits[0, positions[0]]                                       # (V,)
    right = row[tokenizer.vocab[answer]]
    top = np.argsort(-row, kind="stable")[:top_k]
    return 1 + int((row > right).sum()), tokenizer.convert_ids_to_tokens([int(t) for t in top])
