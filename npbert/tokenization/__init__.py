"""BERT tokenization: BasicTokenizer + WordPiece + the encoding interface."""

from npbert.tokenization.basic import BasicTokenizer
from npbert.tokenization.tokenizer import BatchEncoding, BertTokenizer, load_vocab
from npbert.tokenization.wordpiece import WordpieceTokenizer

__all__ = ["BasicTokenizer", "BatchEncoding", "BertTokenizer", "WordpieceTokenizer", "load_vocab"]
