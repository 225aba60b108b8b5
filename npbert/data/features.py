"""Pre-training instances as fixed-size features in one .h5 file, and read back as a dataset.

The features are google-research/bert's write_instance_to_example_files', by name:

    input_ids             (N, T) int32   token ids, 0-padded to max_seq_length T
    input_mask            (N, T) int32   1 for real tokens, 0 for padding
    segment_ids           (N, T) int32   0 for [CLS] A [SEP], 1 for B [SEP]
    masked_lm_positions   (N, P) int32   positions of the predicted tokens, 0-padded to max_predictions_per_seq P
    masked_lm_ids         (N, P) int32   their original ids
    masked_lm_weights     (N, P) float32 1.0 for a real prediction, 0.0 for padding
    next_sentence_labels  (N,)   int32   1 if B is a random sentence ("NotNext"), 0 if it follows A

PretrainingDataset turns each row into what BertForPreTraining takes: input_ids,
attention_mask, token_type_ids, labels (T,) = the original id at the predicted positions and
-100 elsewhere, next_sentence_label.
"""
import numpy as np

from npbert.io._atomic import atomic_path

FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
            "next_sentence_labels")
FORMAT = "npbert-pretraining-features-1"


def instances_to_features(instances, tokenizer, max_seq_length, max_predictions_per_seq):
    """{feature name: array} for the instances (Google's write_instance_to_example_files, in memory)."""
    n, T, P = len(instances), max_seq_length, max_predictions_per_seq
    out = {"input_ids": np.zeros((n, T), np.int32), "input_mask": np.zeros((n, T), np.int32),
           "segment_ids": np.zeros((n, T), np.int32), "masked_lm_positions": np.zeros((n, P), np.int32),
           "masked_lm_ids": np.zeros((n, P), np.int32), "masked_lm_weights": np.zeros((n, P), np.float32),
           "next_sentence_labels": np.zeros(n, np.int32)}
    for k, inst in enumerate(instances):
        ids = tokenizer.convert_tokens_to_ids(inst.tokens)
        if len(ids) > T:
            raise ValueError(f"instance {k} has {len(ids)} tokens, more than max_seq_length={T}")
        if len(inst.masked_lm_positions) > P:
            raise ValueError(f"instance {k} has {len(inst.masked_lm_positions)} predictions, more than "
                             f"max_predictions_per_seq={P}")
        out["input_ids"][k, :len(ids)] = ids
        out["input_mask"][k, :len(ids)] = 1
        out["segment_ids"][k, :len(ids)] = inst.segment_ids
        m = len(inst.masked_lm_positions)
        out["masked_lm_positions"][k, :m] = inst.masked_lm_positions
        out["masked_lm_ids"][k, :m] = tokenizer.convert_tokens_to_ids(inst.masked_lm_labels)
        out["masked_lm_weights"][k, :m] = 1.0
        out["next_sentence_labels"][k] = 1 if inst.is_random_next else 0
    return out


def write_features(path, features, vocab_size, max_seq_length, max_predictions_per_seq):
    """Write the feature arrays to `path` (.h5), atomically."""
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`

    missing = [k for k in FEATURES if k not in features]
    if missing:
        raise KeyError(f"write_features: missing features {missing}")
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["vocab_size"] = int(vocab_size)
            f.attrs["max_seq_length"] = int(max_seq_length)
            f.attrs["max_predictions_per_seq"] = int(max_predictions_per_seq)
            for k in FEATURES:
                f.create_dataset(k, data=features[k])


def read_features(path):
    """(features dict, attrs dict) from a file written by write_features; every inconsistency is
    an error naming the file and the feature."""
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: not an HDF5 file of pre-training features ({e})") from None
    with f:
        if f.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not an npbert pre-training features file (format attribute "
                             f"{f.attrs.get('format')!r}, expected {FORMAT!r}); make one with "
                             "`npbert create-pretraining-data`")
        attrs = {k: int(f.attrs[k]) for k in ("vocab_size", "max_seq_length", "max_predictions_per_seq")}
        feats = {}
        for k in FEATURES:
            if k not in f or not isinstance(f[k], h5py.Dataset):
                raise ValueError(f"{path}: feature {k!r} missing")
            feats[k] = f[k][()]
    n, T, P = len(feats["input_ids"]), attrs["max_seq_length"], attrs["max_predictions_per_seq"]
    shapes = {"input_ids": (n, T), "input_mask": (n, T), "segment_ids": (n, T), "masked_lm_positions": (n, P),
              "masked_lm_ids": (n, P), "masked_lm_weights": (n, P), "next_sentence_labels": (n,)}
    for k, shape in shapes.items():
        if feats[k].shape != shape:
            raise ValueError(f"{path}: feature {k!r} has shape {feats[k].shape}, expected {shape}")
    V = attrs["vocab_size"]
    for k in ("input_ids", "masked_lm_ids"):
        if feats[k].size and (feats[k].min() < 0 or feats[k].max() >= V):
            raise ValueError(f"{path}: {k} holds ids outside [0, {V})")
    if feats["masked_lm_positions"].size and (feats["masked_lm_positions"].min() < 0
                                              or feats["masked_lm_positions"].max() >= T):
        raise ValueError(f"{path}: masked_lm_positions outside [0, {T})")
    # values the model would take as a class or a mask: checked here, not found at training time
    for k, allowed in (("next_sentence_labels", (0, 1)), ("segment_ids", (0, 1)), ("input_mask", (0, 1)),
                       ("masked_lm_weights", (0.0, 1.0))):
        bad = ~np.isin(feats[k], allowed)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise ValueError(f"{path}: feature {k!r} holds {feats[k][bad][0]!r} at row {row} "
                             f"({int(bad.sum())} value(s) outside {list(allowed)})")
    return feats, attrs


class PretrainingDataset:
    """The rows of a features file (or dict) as BertForPreTraining's inputs, one dict per example."""

    def __init__(self, source):
        if isinstance(source, dict):
            self.features = source
            self.vocab_size = None
        else:
            self.features, attrs = read_features(source)
            self.vocab_size = attrs["vocab_size"]

    def __len__(self):
        return len(self.features["input_ids"])

    def __getitem__(self, i):
        f = self.features
        if not -len(self) <= i < len(self):
            raise IndexError(f"example {i} of {len(self)}")
        labels = np.full(f["input_ids"].shape[1], -100, dtype=np.int64)
        real = f["masked_lm_weights"][i] > 0
        labels[f["masked_lm_positions"][i][real]] = f["masked_lm_ids"][i][real]
        return {"input_ids": f["input_ids"][i].astype(np.int64),
                "attention_mask": f["input_mask"][i].astype(np.int64),
                "token_type_ids": f["segment_ids"][i].astype(np.int64),
                "labels": labels,
                "next_sentence_label": np.int64(f["next_sentence_labels"][i])}
