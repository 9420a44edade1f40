"""Data: corpora, tokenizers, binary datasets and token-bucketed batching (never imports models)."""

from aiayn.data.batching import Batch, BatchIterator, TokenBatchSampler, collate
from aiayn.data.binarize import prepare
from aiayn.data.corpus import CorpusError, read_lines, read_parallel
from aiayn.data.dataset import ParallelData, ParallelSplit, load_prepared
from aiayn.data.tokenizer import (
    CharTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    TokenizerError,
    load_tokenizer,
    train_sentencepiece,
)

__all__ = [
    "Batch",
    "BatchIterator",
    "CharTokenizer",
    "CorpusError",
    "ParallelData",
    "ParallelSplit",
    "SentencePieceTokenizer",
    "TokenBatchSampler",
    "Tokenizer",
    "TokenizerError",
    "collate",
    "load_prepared",
    "load_tokenizer",
    "prepare",
    "read_lines",
    "read_parallel",
    "train_sentencepiece",
]
