"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) on PyTorch.

The names a user needs, importable from ``aiayn`` itself::

    from aiayn import Translator

    translator = Translator.from_dir("runs/multi30k_en_de_tiny/model")
    print(translator.translate(["A man in an orange hat."])[0][0].text)

Each name is imported on first use (PEP 562, ``aiayn.exports``), so ``import aiayn`` stays
light: it does not import torch.
"""

from aiayn.exports import lazy_exports

__version__ = "0.1.0"

_SOURCES = {
    # translate and score
    "Translator": "aiayn.translate.translator",
    "SearchOptions": "aiayn.search_options",
    "Translation": "aiayn.translate.translator",
    "corpus_scores": "aiayn.eval.bleu",
    "Scores": "aiayn.eval.bleu",
    # language models
    "load_language_model": "aiayn.decode.generate",
    "generate": "aiayn.decode.generate",
    # models and model directories
    "ModelConfig": "aiayn.config",
    "build_model": "aiayn.models",
    "load_model": "aiayn.store",
    "save_model": "aiayn.store",
    # prepare data and train
    "PrepareConfig": "aiayn.config",
    "prepare": "aiayn.data",
    "TrainConfig": "aiayn.config",
    "load_train_config": "aiayn.config_io",
    "Trainer": "aiayn.train",
    # errors a user can fix
    "AiaynError": "aiayn.errors",
}
__all__ = ["__version__", *_SOURCES]
__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
