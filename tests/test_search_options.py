"""``SearchOptions`` is the one declaration of the decoding settings: every field is found,
with its default, on every surface (the commands' options, a server request where the field
is per-request, a pipeline recipe), so adding an option is adding a field."""

from __future__ import annotations

import dataclasses

import pytest

from aiayn.checks import Flag, Number, OneOf, Whole
from aiayn.cli import build_parser
from aiayn.cli.common import search_options
from aiayn.config import DistillConfig
from aiayn.config_io import recipe_from_dict
from aiayn.errors import ConfigError
from aiayn.search_options import SearchOptions, Terms, Texts
from aiayn.text.glossary import Glossary

FIELDS = dataclasses.fields(SearchOptions)


def _other(field: dataclasses.Field):
    """A valid value of ``field`` other than its default, from its rule."""
    rule, default = field.metadata["rule"], field.default
    if isinstance(rule, Flag):
        return not default
    if isinstance(rule, OneOf):
        return next(c for c in rule.choices if c != default)
    if isinstance(rule, Whole):
        return default + 1
    if isinstance(rule, Texts):
        return (r"ACME-\d+",)
    if isinstance(rule, Terms):
        return Glossary.from_pairs([("dog", "Hund")])
    assert isinstance(rule, Number), f"{field.name}: a rule this test does not know"
    return default + 0.5


def _argv(field: dataclasses.Field, value, tmp_path) -> list[str]:
    flag = field.metadata["flag"] or "--" + field.name.replace("_", "-")
    if isinstance(value, bool):
        return [flag] if flag.startswith("--no-") else [flag if value else f"--no-{flag[2:]}"]
    if isinstance(value, tuple):
        return [part for item in value for part in (flag, item)]
    if isinstance(value, Glossary):
        path = tmp_path / "terms.tsv"
        path.write_text("".join(f"{t.source}\t{t.target}\n" for t in value.terms))
        return [flag, str(path)]
    return [flag, str(value)]


# each command that decodes, the least argv it parses with, and the options its defaults are
ARGV = {
    "translate": (["translate", "--model", "m"], SearchOptions()),
    "serve": (["serve", "--model", "m"], SearchOptions()),
    "calibrate": (["calibrate", "m", "--src", "s", "--ref", "r"], SearchOptions()),
    "distill": (["distill", "t", "s", "--out", "o"], DistillConfig(teacher="t").decode),
    "plot": (["plot", "attention", "--model", "m", "--src", "s", "-o", "o.png"], SearchOptions()),
}


def _offered(command: str) -> list[dataclasses.Field]:
    return [f for f in FIELDS if command in f.metadata["commands"]]


def test_every_field_declares_its_help_and_rule():
    for field in FIELDS:
        assert field.metadata["help"] and field.metadata["rule"].problem(field.default) is None
        assert set(field.metadata["commands"]) <= set(ARGV), field.name


@pytest.mark.parametrize("command", ARGV)
def test_the_commands_generate_an_option_for_each_field(command, tmp_path):
    parser = build_parser()
    argv, base = ARGV[command]
    assert search_options(parser.parse_args(argv), base) == base
    for field in _offered(command):
        value = _other(field)
        args = parser.parse_args([*argv, *_argv(field, value, tmp_path)])
        assert getattr(search_options(args, base), field.name) == value, field.name


def _subcommands(parser, path=()) -> list[tuple[tuple[str, ...], object]]:
    """Every (sub)command's parser, with its path of names (``("plot", "attention")``)."""
    found = [(path, parser)] if path else []
    for action in parser._actions:
        if action.choices and hasattr(action.choices, "items") and action.dest != "help":
            for name, sub in action.choices.items():
                if hasattr(sub, "_actions"):
                    found += _subcommands(sub, (*path, name))
    return found


def test_no_command_declares_a_decoding_option_by_hand():
    """Every option of every command named as a ``SearchOptions`` field is the one generated
    from the field (its help says its default), and only commands the field names have it."""
    names = {f.name: f for f in FIELDS}
    for path, parser in _subcommands(build_parser()):
        for action in parser._actions:
            field = names.get(action.dest)
            if field is None or not action.option_strings:
                continue
            where = " ".join(path)
            if path == ("translate",) and field.name == "format":
                continue  # also names document formats: its own (the field's commands=())
            assert path[0] in field.metadata["commands"], (
                f"aiayn {where} declares {action.option_strings[0]} by hand"
            )
            assert action.help and field.metadata["help"].replace("%", "%%") in action.help, where


def test_translate_has_an_option_for_every_field():
    """A field the generator leaves out (``format``: documents too) has its own option."""
    args = build_parser().parse_args(["translate", "--model", "m"])
    assert {f.name for f in FIELDS} <= set(vars(args))


def test_serve_offers_no_option_a_request_sets_for_itself():
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--model", "m", "--nbest", "2"])


def _wire(value):
    """``value`` as a JSON request gives it."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Glossary):
        return {t.source: t.target for t in value.terms}
    return value


def test_a_request_sets_the_per_request_fields_and_only_those():
    pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")
    from aiayn.serve.checks import BadRequest
    from aiayn.serve.libretranslate_requests import requested_options
    from aiayn.serve.settings import ServeSettings

    server = ServeSettings(models=("m",), decode=SearchOptions(beam=3)).decode
    per_request = [f for f in FIELDS if f.metadata["request"]]
    assert per_request, "no field a request may set"
    for field in FIELDS:
        name, value = field.metadata["request"] or field.name, _other(field)
        found = requested_options(server, {name: _wire(value)})
        expected = value if field.metadata["request"] else getattr(server, field.name)
        assert getattr(found, field.name) == expected, field.name
        if isinstance(value, bool | int | float | str):  # a form's text reads the same
            text = str(value).lower() if isinstance(value, bool) else str(value)
            assert getattr(requested_options(server, {name: text}), field.name) == expected
    for field in per_request:
        with pytest.raises(BadRequest, match=field.metadata["request"]):
            requested_options(server, {field.metadata["request"]: 3.5j})


def test_a_recipe_sets_every_field_in_pipeline_or_its_decode_table():
    default = recipe_from_dict({}).pipeline.decode
    assert default == SearchOptions(text="raw")  # test sets are scored as they are
    for field in FIELDS:
        value = _other(field)
        if isinstance(value, Glossary):  # a glossary is a file the commands read
            with pytest.raises(ConfigError, match="glossary must be"):
                recipe_from_dict({"pipeline": {"glossary": {"dog": "Hund"}}})
            continue
        # html reads natural text out of its markup (a recipe's text is raw by default)
        changes = {field.name: value, **({"text": "natural"} if field.name == "format" else {})}
        toml = {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
        # a recipe's shortlist decodes with the table the pipeline builds: as large a table
        built = {"shortlist_table": value} if field.name == "shortlist" else {}
        table = recipe_from_dict({"pipeline": {"decode": toml, **built}})
        assert table.pipeline.decode == dataclasses.replace(default, **changes)
        if "text" not in changes:  # [pipeline] text is the corpus's (tok or raw)
            flat = recipe_from_dict({"pipeline": {**toml, **built}})
            assert flat.pipeline == table.pipeline, field.name


def test_a_recipe_refuses_a_setting_given_twice_and_bad_values():
    with pytest.raises(ConfigError, match="both"):
        recipe_from_dict({"pipeline": {"beam": 4, "decode": {"beam": 3}}})
    with pytest.raises(ConfigError, match="beam"):
        recipe_from_dict({"pipeline": {"beam": True}})
    with pytest.raises(ConfigError, match="nbest"):
        recipe_from_dict({"pipeline": {"decode": {"nbest": 9}}})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"beam": True}, "beam must be a whole number"),
        ({"min_confidence": 1.5}, "min_confidence must be a number from 0 to 1"),
        ({"protect_patterns": "x"}, "protect_patterns must be a tuple"),
        ({"beam": 2.0}, "beam"),
        ({"alpha": False}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"split_sentences": 1}, "split_sentences must be true or false"),
        ({"stopping": "soon"}, "stopping must be one of exact, beams, heuristic"),
    ],
)
def test_one_validation_refuses_what_no_search_could_use(change, words):
    with pytest.raises(ConfigError, match=words):
        SearchOptions(**change)
