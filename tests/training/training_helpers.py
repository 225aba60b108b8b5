"""Tiny tokenizer, datasets and models for the training tests."""
import numpy as np

import npbert

WORDS = ["the", "king", "queen", "lord", "speak", "good", "night", "sweet", "prince", "love", "death", "crown",
         "sword", "rose", "fair", "foul", "heaven", "earth", "##s", "##ed", "##ing"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return npbert.BertTokenizer(str(path))


def config(**overrides):
    base = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1)
    return npbert.BertConfig(**{**base, **overrides})


def classification_dataset(n=24, seed=0, ragged=True):
    """Label 1 when the sentence contains "king", else 0: learnable by a tiny model."""
    rng = np.random.default_rng(seed)
    data = []
    for i in range(n):
        length = int(rng.integers(3, 9)) if ragged else 6
        ids = rng.integers(5 + 2, len(VOCAB) - 3, size=length)          # words other than "the"/"king"
        label = int(i % 2)
        if label:
            ids[rng.integers(0, length)] = VOCAB.index("king")
        data.append({"input_ids": [2] + ids.tolist() + [3], "label": label})
    return data


def mlm_dataset(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return [{"input_ids": [2] + rng.integers(5, len(VOCAB), size=int(rng.integers(4, 10))).tolist() + [3]}
            for _ in range(n)]
