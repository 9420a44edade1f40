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
from aiayn.data.tokenizer_files import (
    TOKENIZER_FILE,
    TokenizerInfo,
    describe_tokenizers,
    load_tokenizers,
    read_tokenizer_info,
    tokenizer_info_json,
)

__all__ = [
    "TOKENIZER_FILE",
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
    "TokenizerInfo",
    "collate",
    "describe_tokenizers",
    "load_prepared",
    "load_tokenizer",
    "load_tokenizers",
    "prepare",
    "read_lines",
    "read_parallel",
    "read_tokenizer_info",
    "tokenizer_info_json",
    "train_sentencepiece",
]
