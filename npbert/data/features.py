"""Pre-training instances -> fixed-size features in one .h5 file, and back as a dataset.

Google's `write_instance_to_example_files` names and layout (N instances, T = max_seq_length,
P = max_predictions_per_seq), one HDF5 dataset per feature:

    input_ids             (N, T) int32    token ids after masking, 0-padded
    input_mask            (N, T) int32    1 for real tokens, 0 for padding
    segment_ids           (N, T) int32    0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding
    masked_lm_positions   (N, P) int32    positions of the predictions, 0-padded
    masked_lm_ids         (N, P) int32    the original token ids there, 0-padded
    masked_lm_weights     (N, P) float32  1.0 for a real prediction, 0.0 for padding
    next_sentence_labels  (N,)   int32    1 if B is a random next sentence, else 0

`PretrainingDataset` reads it back as examples for BertForPreTraining (transformers' names):
input_ids, attention_mask (= input_mask), token_type_ids (= segment_ids), labels (T,) = the
original id at each masked position and -100 elsewhere, next_sentence_label.  With
`static_masks=False` it gives the unmasked ids (no labels) for a masking collator
(dynamic masking: new masks each epoch).
"""
import numpy as np

FORMAT = "npbert-pretraining-features"
FEATURES = {"input_ids": (2, np.int32), "input_mask": (2, np.int32), "segment_ids": (2, np.int32),
            "masked_lm_positions": (2, np.int32), "masked_lm_ids": (2, np.int32),
            "masked_lm_weights": (2, np.float32), "next_sentence_labels": (1, np.int32)}


def instances_to_features(instances, vocab, max_seq_length, max_predictions_per_seq):
    """TrainingInstances -> dict of the arrays above (Google's padding: zeros)."""
    N, T, P = len(instances), max_seq_length, max_predictions_per_seq
    f = {name: np.zeros((N, T) if nd == 2 and name in ("input_ids", "input_mask", "segment_ids")
                        else (N, P) if nd == 2 else (N,), dtype) for name, (nd, dtype) in FEATURES.items()}
    for n, inst in enumerate(instances):
        if len(inst.tokens) > T:
            raise ValueError(f"instance {n} has {len(inst.tokens)} tokens > max_seq_length={T}")
        if len(inst.masked_lm_positions) > P:
            raise ValueError(f"instance {n} has {len(inst.masked_lm_positions)} predictions > "
                             f"max_predictions_per_seq={P}")
        try:
            ids = [vocab[t] for t in inst.tokens]
            label_ids = [vocab[t] for t in inst.masked_lm_labels]
        except KeyError as e:
            raise ValueError(f"instance {n}: token {e.args[0]!r} is not in the vocabulary") from None
        L, M = len(ids), len(label_ids)
        f["input_ids"][n, :L] = ids
        f["input_mask"][n, :L] = 1
        f["segment_ids"][n, :L] = inst.segment_ids
        f["masked_lm_positions"][n, :M] = inst.masked_lm_positions
        f["masked_lm_ids"][n, :M] = label_ids
        f["masked_lm_weights"][n, :M] = 1.0
        f["next_sentence_labels"][n] = 1 if inst.is_random_next else 0
    return f


def write_instances_to_h5(instances, vocab, max_seq_length, max_predictions_per_seq, path):
    """Write the features of `instances` to the .h5 file `path`, atomically.  vocab: token -> id."""
    import h5py
    from npbert.io._atomic import atomic_path
    features = instances_to_features(instances, vocab, max_seq_length, max_predictions_per_seq)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as h5:
            h5.attrs["format"] = FORMAT
            h5.attrs["max_seq_length"] = max_seq_length
            h5.attrs["max_predictions_per_seq"] = max_predictions_per_seq
            h5.attrs["vocab_size"] = len(vocab)
            for name, array in features.items():
                h5.create_dataset(name, data=array)
    return path


def read_features(path):
    """The feature arrays of an instance file, checked: a file that is not one, a missing or
    mis-shaped dataset, or ids out of range raise ValueError naming the file and the dataset."""
    import h5py
    try:
        h5 = h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable HDF5 instance file ({e})") from None
    with h5:
        if h5.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not an npbert pre-training instance file (attribute format="
                             f"{h5.attrs.get('format')!r}, expected {FORMAT!r}); make one with "
                             "`npbert create-pretraining-data`")
        out = {}
        for name, (nd, dtype) in FEATURES.items():
            if name not in h5:
                raise ValueError(f"{path}: the dataset {name!r} is missing (has {sorted(h5)})")
            try:
                out[name] = np.asarray(h5[name][()], dtype=dtype)
            except (OSError, ValueError, TypeError) as e:
                raise ValueError(f"{path}: the dataset {name!r} cannot be read ({e}): the file is corrupt") from None
            if out[name].ndim != nd:
                raise ValueError(f"{path}: {name} has shape {out[name].shape}, expected {nd} dimensions")
        attrs = {k: int(h5.attrs[k]) for k in ("max_seq_length", "max_predictions_per_seq", "vocab_size")}
    N, T = out["input_ids"].shape
    P = out["masked_lm_positions"].shape[1]
    for name, arr in out.items():
        want = (N, T) if name in ("input_ids", "input_mask", "segment_ids") else (N, P) if arr.ndim == 2 else (N,)
        if arr.shape != want:
            raise ValueError(f"{path}: {name} has shape {arr.shape}, expected {want}")
    V = attrs["vocab_size"]
    for name in ("input_ids", "masked_lm_ids"):
        bad = np.argwhere((out[name] < 0) | (out[name] >= V))
        if len(bad):
            where = tuple(int(i) for i in bad[0])
            raise ValueError(f"{path}: {name}[{where}] = {out[name][where]} is outside the "
                             f"vocabulary [0, {V})")
    bad = np.argwhere((out["masked_lm_positions"] < 0) | (out["masked_lm_positions"] >= T))
    if len(bad):
        raise ValueError(f"{path}: masked_lm_positions[{tuple(int(i) for i in bad[0])}] is outside [0, {T})")
    out["attrs"] = attrs
    return out


class PretrainingDataset:
    """A sequence of examples for BertForPreTraining read from an instance file (see module doc).

    features: a path or the dict `read_features` returns.  Example n (T = max_seq_length):
    input_ids (T,), attention_mask (T,), token_type_ids (T,), next_sentence_label (),
    and with static_masks: labels (T,) (-100 where nothing is predicted).
    """

    def __init__(self, features, static_masks=True):
        f = read_features(features) if isinstance(features, (str, bytes)) or hasattr(features, "__fspath__") \
            else features
        self.static_masks = static_masks
        N, T = f["input_ids"].shape
        rows = np.arange(N)[:, None]                                               # (N, 1)
        real = f["masked_lm_weights"] > 0                                           # (N, P)
        labels = np.full((N, T), -100, dtype=np.int64)                              # (N, T)
        labels[np.broadcast_to(rows, real.shape)[real], f["masked_lm_positions"][real]] = f["masked_lm_ids"][real]
        self.labels = labels
        if static_masks:
            self.input_ids = f["input_ids"].astype(np.int64)
        else:   # the original tokens: masked positions given back their label
            self.input_ids = np.where(labels >= 0, labels, f["input_ids"]).astype(np.int64)
        self.attention_mask = f["input_mask"].astype(np.int64)
        self.token_type_ids = f["segment_ids"].astype(np.int64)
        self.next_sentence_label = f["next_sentence_labels"].astype(np.int64)
        self.attrs = f.get("attrs", {})

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, n):
        if not -len(self) <= n < len(self):
            raise IndexError(f"example {n} of a dataset of {len(self)}")
        if self.static_masks:
            return {"input_ids": self.input_ids[n], "attention_mask": self.attention_mask[n],
                    "token_type_ids": self.token_type_ids[n], "labels": self.labels[n],
                    "next_sentence_label": self.next_sentence_label[n]}
        # dynamic masking: the real tokens only; the collator pads with the tokenizer's [PAD]
        L = int(self.attention_mask[n].sum())
        return {"input_ids": self.input_ids[n, :L], "attention_mask": self.attention_mask[n, :L],
                "token_type_ids": self.token_type_ids[n, :L], "next_sentence_label": self.next_sentence_label[n]}
