"""BERT tokenization: BasicTokenizer + WordPiece + the encoding interface (see docs/tokenizer.md)."""

from npbert.tokenization.basic import BasicTokenizer
from npbert.tokenization.encoding import BatchEncoding
from npbert.tokenization.files import load_vocab
from npbert.tokenization.tokenizer import BertTokenizer
from npbert.tokenization.wordpiece import WordpieceTokenizer

__all__ = ["BasicTokenizer", "BatchEncoding", "BertTokenizer", "WordpieceTokenizer", "load_vocab"]
