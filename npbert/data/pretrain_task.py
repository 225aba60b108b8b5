"""What `npbert pretrain` and `npbert demo` share: model sizes, MLM/NSP metrics and their baselines.

Sizes (Turc et al. 2019's compact BERTs and BERT-base): heads = H / 64, intermediate = 4 H.

    tiny   L=2  H=128      mini   L=4  H=256      small  L=4  H=512
    medium L=8  H=512      base   L=12 H=768
"""
import numpy as np

MODEL_SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}


def config_for_size(size, vocab_size, max_position_embeddings=512, **overrides):
    """A BertConfig for one of MODEL_SIZES (heads H/64, intermediate 4H)."""
    from npbert.config import BertConfig
    if size not in MODEL_SIZES:
        raise ValueError(f"model size {size!r}: choose one of {sorted(MODEL_SIZES)}")
    L, H = MODEL_SIZES[size]
    kwargs = dict(vocab_size=vocab_size, hidden_size=H, num_hidden_layers=L, num_attention_heads=max(H // 64, 1),
                  intermediate_size=4 * H, max_position_embeddings=max_position_embeddings)
    kwargs.update(overrides)
    return BertConfig(**kwargs)


def preprocess_logits_for_metrics(logits, labels):
    """(prediction_logits, seq_relationship_logits) -> (MLM predictions (B, T) with -100 where
    nothing is predicted, NSP predictions (B,)).  Keeps only argmaxes, not (B, T, V) logits.
    prediction_logits may be the gathered (M, V) rows of BertForPreTraining.gather_masked_lm."""
    prediction_logits, seq_relationship_logits = logits
    labels = np.asarray(labels)
    mlm = np.full(labels.shape, -100, dtype=np.int64)                            # (B, T)
    if prediction_logits.ndim == 2:            # (M, V): the rows of the positions with a label
        mlm[labels != -100] = prediction_logits.argmax(-1)
    else:
        mlm[labels != -100] = prediction_logits.argmax(-1)[labels != -100]
    return mlm, seq_relationship_logits.argmax(-1)


def compute_metrics(eval_pred):
    """mlm_accuracy over the masked positions, nsp_accuracy over the pairs."""
    (mlm_pred, nsp_pred), (labels, nsp_labels) = eval_pred.predictions, eval_pred.label_ids
    where = labels != -100
    return {"mlm_accuracy": float((mlm_pred[where] == labels[where]).mean()) if where.any() else float("nan"),
            "nsp_accuracy": float((np.asarray(nsp_pred) == np.asarray(nsp_labels)).mean())}


def baselines(train_dataset, eval_dataset):
    """Accuracy of always predicting the most frequent masked token / NSP class of the training
    examples, measured on the eval examples (the number a model must beat to have learned)."""
    train_labels = np.concatenate([np.asarray(train_dataset[i]["labels"]) for i in range(len(train_dataset))])
    train_labels = train_labels[train_labels != -100]
    eval_labels = np.concatenate([np.asarray(eval_dataset[i]["labels"]) for i in range(len(eval_dataset))])
    eval_labels = eval_labels[eval_labels != -100]
    token = int(np.bincount(train_labels).argmax())
    nsp_train = np.array([int(train_dataset[i]["next_sentence_label"]) for i in range(len(train_dataset))])
    nsp_eval = np.array([int(eval_dataset[i]["next_sentence_label"]) for i in range(len(eval_dataset))])
    nsp_class = int(np.bincount(nsp_train, minlength=2).argmax())
    return {"mlm_most_frequent_token": token, "mlm_accuracy": float((eval_labels == token).mean()),
            "nsp_accuracy": float((nsp_eval == nsp_class).mean())}
