"""Pre-training data: Google's create_pretraining_data.py read along, features in .h5, a
WordPiece vocabulary learner, and the bundled corpora (npbert/data/corpus, see its NOTICE)."""
from .features import PretrainingDataset, instances_to_features, read_features, write_features
from .create_pretraining_data import (TrainingInstance, create_instances_from_document, create_masked_lm_predictions,
                          create_training_instances, read_documents, truncate_seq_pair)
from .vocab import build_vocab, learn_wordpiece_vocab

__all__ = ["TrainingInstance", "create_training_instances", "create_instances_from_document",
           "create_masked_lm_predictions", "truncate_seq_pair", "read_documents", "instances_to_features",
           "write_features", "read_features", "PretrainingDataset", "build_vocab", "learn_wordpiece_vocab"]
