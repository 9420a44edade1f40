"""The documentation's reference pages, written from the code so they cannot drift from it:
every ``aiayn`` command and option (from the argparse parsers) and every configuration key
(from the config dataclasses, with type, default, allowed range and the comment that names
it in the paper)."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import io
import re
import tokenize
import typing
from typing import Any

from aiayn import config
from aiayn.cli import build_parser
from aiayn.search_options import SearchOptions

SECTIONS = (  # (TOML table, dataclass): a training config, then a pipeline recipe's tables
    ("", config.TrainConfig),
    ("model", config.ModelConfig),
    ("data", config.DataConfig),
    ("optim", config.OptimConfig),
    ("run", config.RunConfig),
    ("pipeline", config.PipelineConfig),
    ("pipeline.decode", SearchOptions),
    ("prepare", config.PrepareConfig),
)
TABLES = {"": {"model", "data", "optim", "run"}, "pipeline": {"decode"}}  # listed apart
RANGE = re.compile(
    r"^(?:\w+\.)?(?P<name>\w+) must be (?:a whole number |a number )?(?P<allowed>.+), got "
)


# ---- commands ---------------------------------------------------------------------------


def commands(
    parser: argparse.ArgumentParser | None = None, prefix: str = "aiayn"
) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(``aiayn data multi30k``, its parser, its help line) for every command that runs, in
    the order the parsers list them."""
    parser = parser or build_parser()
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                line = helps.get(name, "")
                found += commands(sub, f"{prefix} {name}") or [(f"{prefix} {name}", sub, line)]
    return found


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _option_row(action: argparse.Action) -> str:
    names = ", ".join(f"`{n}`" for n in action.option_strings) or f"`{action.dest}`"
    if action.choices is not None:
        value = " \\| ".join(f"`{c}`" for c in action.choices)
    elif action.nargs == 0:
        value = ""
    else:
        value = f"`{action.metavar or action.dest.upper()}`"
        if action.nargs in ("*", "+"):
            value += " …"
    default = action.default
    shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else default
    shown = f"`{shown}`" if shown not in ("", []) else ""
    return f"| {names} | {value} | {shown} | {_cell(action.help or '')} |"


def cli_reference() -> str:
    """The Markdown page of every command and option."""
    out = [
        "# Commands",
        "",
        "Every `aiayn` command and option, read from the command's own parsers "
        "(`aiayn COMMAND --help` prints the same).",
        "",
    ]
    for name, sub, line in commands():
        out += [f"## `{name}`", ""]
        intro = sub.description or line
        if intro:
            out += [intro.strip(), ""]
        usage = sub.format_usage().replace("usage: ", "").strip()
        out += ["```text", usage, "```", ""]
        rows = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        if rows:
            out += ["| option | value | default | meaning |", "|---|---|---|---|"]
            out += [_option_row(a) for a in rows]
            out.append("")
    return "\n".join(out)


# ---- configuration ----------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """The comment at the end of each field's line in ``cls``'s source."""
    source = inspect.getsource(cls)
    comments: dict[str, str] = {}
    line_fields = {}
    for number, line in enumerate(source.splitlines(), 1):
        match = re.match(r"^\s{4}(\w+):", line)
        if match:
            line_fields[number] = match[1]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.start[0] in line_fields:
            comments[line_fields[token.start[0]]] = token.string.lstrip("# ").strip()
    return comments


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f'`"{a}"`' for a in typing.get_args(annotation))
    if typing.get_args(annotation):  # tuple[float, float], ...
        return f"`{str(annotation).replace('typing.', '')}`"
    return f"`{getattr(annotation, '__name__', annotation)}`"


def allowed_range(cls: type, name: str, default: Any) -> str:
    """What ``cls.__post_init__`` allows for a number (found by trying a value below any
    range: its error says the range), or ""."""
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        return ""
    probe = -1 if isinstance(default, int) else -1.0
    required = {  # fields without a default (PrepareConfig's languages and files)
        f.name: f"<{f.name}>"
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    try:
        cls(**{**required, name: probe})
    except (ValueError, TypeError) as error:  # ConfigError is a ValueError
        match = RANGE.match(str(error))
        if match and match["name"] == name:
            return match["allowed"]
    return ""


def toml_value(value: Any) -> str:
    """``value`` as a TOML file writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if dataclasses.is_dataclass(value):
        items = ", ".join(f"{k} = {toml_value(v)}" for k, v in vars(value).items())
        return "{ " + items + " }"
    return repr(value)


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def config_reference() -> str:
    """The Markdown page of every configuration key."""
    out = [
        "# Configuration",
        "",
        "Every key of a training config (`aiayn train CONFIG.toml`) and of a pipeline recipe "
        "(`aiayn pipeline RECIPE.toml`, which adds `[pipeline]` and `[prepare]`), read from the "
        "frozen dataclasses in `aiayn.config`. Any key can be set on the command line with "
        "`--set table.key=value`; the meaning column gives the paper's name where it has one.",
        "",
        'Two keys are not fields: a top-level `extends = "other.toml"` reads that file first '
        "and overrides it key by key, and `[model] preset` starts from a preset's sizes:",
        "",
        "| preset | " + " | ".join(f"`{k}`" for k in config.MODEL_PRESETS["base"]) + " |",
        "|---|" + "---:|" * len(config.MODEL_PRESETS["base"]),
    ]
    for name, sizes in config.MODEL_PRESETS.items():
        out.append(f"| `{name}` | " + " | ".join(str(v) for v in sizes.values()) + " |")
    out.append("")
    for table, cls in SECTIONS:
        types = typing.get_type_hints(cls)
        comments = field_comments(cls)
        title = f"`[{table}]`: `{cls.__name__}`" if table else f"top level: `{cls.__name__}`"
        out += [f"## {title}", "", inspect.cleandoc(cls.__doc__ or ""), ""]
        if cls is config.PrepareConfig:
            out += [
                "In a recipe's `[prepare]` table, the pipeline sets the languages and the "
                "files from `[pipeline]`; `aiayn prepare` takes them as options.",
                "",
            ]
        if cls is SearchOptions:
            out += [
                "A recipe may write these keys in `[pipeline]` itself (`beam = 4`), but "
                "`text`, which there is the corpus's; a recipe decodes raw text by default, "
                "and takes no glossary (a file that `aiayn translate --glossary` reads).",
                "",
            ]
        out += ["| key | type | default | range | meaning |", "|---|---|---|---|---|"]
        for field in dataclasses.fields(cls):
            if dataclasses.is_dataclass(types[field.name]) and field.name in TABLES.get(table, ()):
                continue  # a table of its own below
            default = _default(field)
            shown = "" if default is None else f"`{toml_value(default)}`"
            out.append(
                f"| `{field.name}` | {_type_name(types[field.name])} | {_cell(shown)} | "
                f"{allowed_range(cls, field.name, default)} | "
                f"{_cell(comments.get(field.name, field.metadata.get('help', '')))} |"
            )
        out.append("")
    return "\n".join(out)
