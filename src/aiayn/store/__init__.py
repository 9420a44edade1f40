"""Model directories on disk: ``config.json`` + ``model.safetensors`` + tokenizer files."""

from aiayn.store.model_dir import (
    ModelLoadError,
    is_model_directory,
    load_model,
    read_model_config,
    save_model,
)

__all__ = ["ModelLoadError", "is_model_directory", "load_model", "read_model_config", "save_model"]
