"""Configs from dicts and TOML files: type-checked, unknown keys refused, errors naming the key.

Imports no torch, so tools that only read configs stay light.
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from typing import Any, Literal

from aiayn.config import (
    MODEL_PRESETS,
    ModelConfig,
    PipelineConfig,
    PrepareConfig,
    Recipe,
    TrainConfig,
)
from aiayn.errors import ConfigError
from aiayn.search_options import SearchOptions


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON/TOML-ready dict of a (possibly nested) config dataclass."""
    return dataclasses.asdict(cfg)


def config_from_dict(cls: type, values: dict[str, Any], *, where: str = "config") -> Any:
    """Build the dataclass ``cls`` from ``values``, rejecting unknown keys and wrong types.

    Nested dataclass fields are built recursively: a table sets the fields it names, the
    others keep the field's default value. Errors name the offending key.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        field_type = _resolved_type(cls, key)
        if dataclasses.is_dataclass(field_type):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key}: expected a table, got {type(value).__name__}")
            nested = config_from_dict(field_type, value, where=f"{where}.{key}")
            kwargs[key] = _over_default(fields[key], value, nested, f"{where}.{key}")
        else:
            kwargs[key] = _check_type(value, field_type, f"{where}.{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _over_default(field: dataclasses.Field, values: dict[str, Any], built: Any, where: str) -> Any:
    """``built`` (from ``values``) as the field's default with ``values`` set, where the
    field's default is not the class's own (``PipelineConfig.decode``: raw text)."""
    if field.default_factory is dataclasses.MISSING:
        return built
    try:
        return dataclasses.replace(
            field.default_factory(), **{k: getattr(built, k) for k in values}
        )
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _resolved_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _check_type(value: Any, expected: Any, where: str) -> Any:
    origin = typing.get_origin(expected)
    args = typing.get_args(expected)
    if expected is Any:
        return value
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return _check_type(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {value!r} does not match {expected}")
    if expected is type(None):
        if value is not None:
            raise ConfigError(f"{where}: expected none, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        checked = [_check_type(v, item, where) for v in value]
        return tuple(checked) if origin is tuple else checked
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {expected.__name__}, got a boolean")
    if not isinstance(value, expected):
        raise ConfigError(
            f"{where}: expected {expected.__name__}, got {type(value).__name__} ({value!r})"
        )
    return value


def train_config_from_dict(values: dict[str, Any], *, where: str = "config") -> TrainConfig:
    """Build a TrainConfig; ``[model] preset = "tiny"`` fills in a preset before overrides.

    With ``run.init_from``, the ``[model]`` fields not set (by a preset or by hand) are the
    ones of the model directory it names; the trainer refuses those set to other values.
    """
    values = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
    model = values.get("model", {})
    if isinstance(model, dict) and "preset" in model:
        preset = model.pop("preset")
        if preset not in MODEL_PRESETS:
            choices = sorted(MODEL_PRESETS)
            raise ConfigError(f"{where}.model.preset: unknown preset {preset!r}; choose {choices}")
        values["model"] = {**MODEL_PRESETS[preset], **model}
    run = values.get("run", {})
    init_from = run.get("init_from") if isinstance(run, dict) else None
    if isinstance(init_from, str) and init_from and isinstance(values.get("model", {}), dict):
        base = config_to_dict(model_config_of(init_from, where=f"{where}.run.init_from"))
        values["model"] = {**base, **values.get("model", {})}
    return config_from_dict(TrainConfig, values, where=where)


MODEL_CONFIG_FILE = "config.json"  # in a model directory: {"format": "aiayn-model", "model": ...}


def model_config_of(directory: str | os.PathLike, *, where: str) -> ModelConfig:
    """The ModelConfig of the model directory ``directory`` (``where`` names the option
    that gave it, for errors).

    Raises:
        ConfigError: no such directory, or not an aiayn model directory.
    """
    path = os.path.join(directory, MODEL_CONFIG_FILE)
    if not os.path.isdir(directory):
        raise ConfigError(f"{where}: {directory}: no such model directory")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ConfigError(
            f"{where}: {directory} is not a model directory (no {MODEL_CONFIG_FILE})"
        ) from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{where}: {path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != "aiayn-model":
        raise ConfigError(
            f"{where}: {directory} is not an aiayn model directory (a training run's is RUN/best; "
            "a Hugging Face model is imported first: aiayn import marian)"
        )
    model = data.get("model")
    if not isinstance(model, dict):
        raise ConfigError(f"{where}: {path}: no model table")
    return config_from_dict(ModelConfig, model, where=path)


def parse_override(assignment: str) -> tuple[list[str], Any]:
    """``"optim.lr=0.001"`` -> (["optim", "lr"], 0.001); values use TOML syntax, else strings
    (a value that opens a TOML list, table or string must be one: a quote the shell took away
    is an error that says so)."""
    toml = _toml()
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. optim.lr=0.001")
    try:
        value = toml.loads(f"v = {raw}")["v"]
    except toml.TOMLDecodeError:
        if raw.strip()[:1] in ("[", "{", '"', "'"):
            raise ConfigError(
                f"--set {assignment!r}: {raw.strip()} is not a TOML value; strings inside "
                f"need double quotes, and the shell keeps them only inside single quotes: "
                f"""--set '{key.strip()}=["a", "b"]'"""
            ) from None
        value = raw
    return key.strip().split("."), value


def apply_overrides(values: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """Return ``values`` with each ``KEY=VALUE`` assignment set (nested by dots)."""
    values = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
    for assignment in assignments:
        path, value = parse_override(assignment)
        node = values
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {assignment!r}: {part} is not a table")
        node[path[-1]] = value
    return values


def load_toml(path: str, *, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """Read a TOML file; syntax errors become ConfigErrors naming the file.

    A top-level ``extends = "other.toml"`` (relative to this file) reads that file first;
    this file's tables then override it key by key, so a sibling recipe states only what
    differs.
    """
    toml = _toml()
    try:
        with open(path, "rb") as f:
            values = toml.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a directory, not a TOML config file") from None
    except (PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e})") from None
    except toml.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    parent = values.pop("extends", None)
    if parent is None:
        return values
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: extends must be a file name, got {parent!r}")
    parent_path = os.path.join(os.path.dirname(path), parent)
    if os.path.realpath(parent_path) in _seen:
        raise ConfigError(f"{path}: extends {parent} in a cycle")
    base = load_toml(parent_path, _seen=(*_seen, os.path.realpath(path)))
    return _merged(base, values)


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override``'s keys set, recursing into tables present in both."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib


def recipe_from_dict(
    values: dict[str, Any], *, where: str = "recipe", recipe_dir: str = ""
) -> Recipe:
    """A Recipe; with ``recipe_dir``, a relative ``run.init_from`` (or ``prepare.vocab_from``)
    is relative to it, as the recipe's own file prefixes are."""
    values = _relative_to(dict(values), recipe_dir) if recipe_dir else dict(values)
    pipeline_values = _decode_table(values.pop("pipeline", {}), f"{where}.decode")
    pipeline = config_from_dict(PipelineConfig, pipeline_values, where=f"{where}")
    prepare = dict(values.pop("prepare", {}))
    fixed = {"src_lang", "tgt_lang", "train", "valid", "test"}
    clash = sorted(fixed & set(prepare))
    if clash:
        raise ConfigError(f"{where}.prepare: {clash} are set by the pipeline")
    known = {f.name for f in dataclasses.fields(PrepareConfig)} - fixed
    unknown = sorted(set(prepare) - known)
    if unknown:
        raise ConfigError(f"{where}.prepare: unknown key(s) {unknown}; known: {sorted(known)}")
    train = train_config_from_dict(values, where=where)
    try:
        return Recipe(pipeline=pipeline, prepare=prepare, train=train)
    except ValueError as e:  # what the tables allow together
        raise ConfigError(f"{where}: {e}") from None


def _decode_table(values: Any, where: str) -> Any:
    """``[pipeline]`` with its keys named as SearchOptions fields (and not as its own: its
    ``text`` is the corpus's) moved into its ``decode`` table."""
    if not isinstance(values, dict):
        return values
    own = {f.name for f in dataclasses.fields(PipelineConfig)}
    names = {f.name for f in dataclasses.fields(SearchOptions)} - own
    flat = {k: v for k, v in values.items() if k in names}
    if not flat:
        return values
    table = values.get("decode", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
    if twice := sorted(set(flat) & set(table)):
        raise ConfigError(f"{where}: {twice} set both in [pipeline] and in [pipeline.decode]")
    rest = {k: v for k, v in values.items() if k not in flat}
    return {**rest, "decode": {**flat, **table}}


def _relative_to(values: dict[str, Any], base: str) -> dict[str, Any]:
    for table, key in (("run", "init_from"), ("prepare", "vocab_from")):
        values = _relative_key(values, table, key, base)
    pipeline = values.get("pipeline")
    if isinstance(pipeline, dict):  # [pipeline.distill] teacher
        values["pipeline"] = _relative_key(pipeline, "distill", "teacher", base)
    return values


def _relative_key(values: dict[str, Any], table: str, key: str, base: str) -> dict[str, Any]:
    fields = values.get(table)
    path = fields.get(key) if isinstance(fields, dict) else None
    if isinstance(path, str) and path and not os.path.isabs(path):
        return {**values, table: {**fields, key: os.path.join(base, path)}}
    return values


def load_train_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """A training config from a TOML file, with ``KEY=VALUE`` overrides applied."""
    return train_config_from_dict(apply_overrides(load_toml(path), list(overrides)), where=path)
