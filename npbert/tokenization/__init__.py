"""BERT tokenization: BasicTokenizer + WordPiece + the encoding interface (see docs/tokenizer.md).

Also the free functions of google-research/bert's `tokenization.py`: `load_vocab`,
`convert_tokens_to_ids(vocab, tokens)`, `convert_ids_to_tokens(inv_vocab, ids)`, `convert_by_vocab`.
"""

from npbert.tokenization.alignment import CharSpan, TokenSpan
from npbert.tokenization.basic import BasicTokenizer
from npbert.tokenization.encoding import BatchEncoding
from npbert.tokenization.files import convert_by_vocab, convert_ids_to_tokens, convert_tokens_to_ids, load_vocab
from npbert.tokenization.tokenizer import BertTokenizer
from npbert.tokenization.wordpiece import WordpieceTokenizer

__all__ = ["BasicTokenizer", "BatchEncoding", "BertTokenizer", "CharSpan", "TokenSpan", "WordpieceTokenizer",
           "convert_by_vocab", "convert_ids_to_tokens", "convert_tokens_to_ids", "load_vocab"]
