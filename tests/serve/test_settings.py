"""``ServeSettings`` is the one declaration of a server's settings: every field is an option of
``aiayn serve`` with its default and help, read back into the same field, and checked by the
same rule, so adding a setting is adding a field and its help."""

from __future__ import annotations

import dataclasses

import pytest

from aiayn.checks import Maybe, Number, OneOf, Text, Whole
from aiayn.cli import build_parser
from aiayn.cli.common import field_values
from aiayn.errors import ConfigError
from aiayn.search_options import Texts
from aiayn.serve.settings import PROFILE_NAMES, Keys, ServeSettings, setting_fields

FIELDS = setting_fields()


def _other(field: dataclasses.Field, tmp_path):
    """(argv, the value the field then holds) for a valid value other than the default."""
    rule, flag = (
        field.metadata["rule"],
        field.metadata["flag"] or "--" + field.name.replace("_", "-"),
    )
    inner = rule.rule if isinstance(rule, Maybe) else rule
    if isinstance(rule, Keys):
        (tmp_path / "keys").write_text("# ours\nsecret\n")
        return [flag, str(tmp_path / "keys")], frozenset({"secret"})
    if isinstance(rule, Texts):
        values = ("a", "b")
        if field.metadata["nargs"]:
            return [flag, *values], values
        return [part for v in values for part in (flag, v)], values
    if isinstance(inner, OneOf):
        value = next(c for c in inner.choices if c != field.default)
    elif isinstance(inner, Whole):
        value = (field.default or inner.minimum) + 1
    elif isinstance(inner, Number):
        value = field.default / 2 if field.default else 1.5
    else:
        assert isinstance(inner, Text), f"{field.name}: a rule this test does not know"
        value = "cuda:1" if field.name == "device" else str(tmp_path / "file")
    return [flag, str(value)], value


def test_every_setting_but_decode_is_an_option_with_its_help():
    names = {f.name for f in dataclasses.fields(ServeSettings)}
    assert names - {f.name for f in FIELDS} == {"decode"}  # SearchOptions' own options
    parser = build_parser()
    serve = next(a for a in parser._actions if a.dest == "command").choices["serve"]
    helps = {a.dest: a.help for a in serve._actions}
    for field in FIELDS:
        assert field.metadata["help"] in helps[field.name], field.name


def test_serve_reads_each_option_into_its_field(tmp_path):
    parser = build_parser()
    base = ["serve", "--model", "m"]
    assert ServeSettings(**field_values(parser.parse_args(base), ServeSettings)) == ServeSettings(
        models=("m",)
    )
    for field in FIELDS:
        argv, value = _other(field, tmp_path)
        args = parser.parse_args([*base, *argv] if field.name != "models" else ["serve", *argv])
        settings = ServeSettings(**field_values(args, ServeSettings))
        assert getattr(settings, field.name) == value, field.name


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"workers": 0}, "workers must be"),
        ({"max_file_mb": 21}, "max_file_mb must be"),
        ({"profile": "turbo"}, "profile must be one of"),
        ({"api_keys": frozenset()}, "api_keys must be"),
        ({"models": ()}, "models must name"),
        ({"timeout": float("nan")}, "timeout"),
    ],
)
def test_one_rule_refuses_a_setting_no_server_could_use(change, words):
    with pytest.raises(ConfigError, match=words):
        ServeSettings(**{"models": ("m",), **change})


def test_the_profile_names_are_the_profiles():
    from aiayn.accel import PROFILES

    assert set(PROFILE_NAMES) == set(PROFILES)
