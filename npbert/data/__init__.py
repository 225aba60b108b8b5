"""Data for pre-training: the bundled corpora, a WordPiece vocabulary learner, Google's
pre-training instances and the fixed-size features stored in one .h5 file.

    from npbert.data import corpus_path, build_vocab, create_training_instances
See docs/pretraining.md.
"""
from .corpus import corpus_path, shakespeare_documents, write_documents
from .features import PretrainingDataset, read_features, write_instances_to_h5
from .pretraining import (TrainingInstance, create_instances_from_document, create_masked_lm_predictions,
                          create_training_instances, read_documents, truncate_seq_pair)
from .vocab import build_vocab, write_vocab

__all__ = ["corpus_path", "shakespeare_documents", "write_documents", "TrainingInstance",
           "create_training_instances", "create_instances_from_document", "create_masked_lm_predictions",
           "truncate_seq_pair", "read_documents", "build_vocab", "write_vocab", "write_instances_to_h5",
           "read_features", "PretrainingDataset"]
