"""Data: corpora, tokenizers, binary datasets and token-bucketed batching (never imports models).

Names are imported on first use (``aiayn.exports``): the corpus reader, tokenizers and
``aiayn.data.lm_stream`` import without torch.
"""

from aiayn.exports import lazy_exports

_SOURCES = {
    "TOKENIZER_FILE": "aiayn.data.tokenizer_files",
    "Batch": "aiayn.data.batching",
    "BatchIterator": "aiayn.data.batching",
    "CharTokenizer": "aiayn.data.tokenizer",
    "CorpusError": "aiayn.data.corpus",
    "ParallelData": "aiayn.data.dataset",
    "ParallelSplit": "aiayn.data.dataset",
    "SentencePieceTokenizer": "aiayn.data.tokenizer",
    "TokenBatchSampler": "aiayn.data.batching",
    "Tokenizer": "aiayn.data.tokenizer",
    "TokenizerError": "aiayn.data.tokenizer",
    "TokenizerInfo": "aiayn.data.tokenizer_files",
    "collate": "aiayn.data.batching",
    "describe_tokenizers": "aiayn.data.tokenizer_files",
    "load_prepared": "aiayn.data.dataset",
    "load_tokenizer": "aiayn.data.tokenizer",
    "load_tokenizers": "aiayn.data.tokenizer_files",
    "prepare": "aiayn.data.binarize",
    "read_lines": "aiayn.data.corpus",
    "read_parallel": "aiayn.data.corpus",
    "read_tokenizer_info": "aiayn.data.tokenizer_files",
    "tokenizer_info_json": "aiayn.data.tokenizer_files",
    "train_sentencepiece": "aiayn.data.tokenizer",
}
__all__ = list(_SOURCES)
__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
