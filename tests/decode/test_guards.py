"""The decoding guards: the length guard and the repetition stop in both searches, shouted
input in the case the model knows, and the length ratio a trained model directory records."""

import json
import math

import pytest
import torch

from aiayn.accel import get_profile
from aiayn.config import EOS_ID, PAD_ID
from aiayn.data.tokenizer_files import read_tokenizer_info
from aiayn.decode import beam_search, greedy_search
from aiayn.decode.guards import LENGTH_MARGIN, looping, output_limits
from aiayn.errors import ConfigError
from aiayn.search_options import SearchOptions
from aiayn.text.case import in_known_case, is_shouted
from aiayn.translate.translator import Translator

from .scripted import A, B, C, ScriptedDecoder


class Loop(dict):
    """A script whose every prefix continues with ``token`` (a model stuck in a loop)."""

    def __init__(self, token: int):
        super().__init__()
        self.token = token

    def get(self, prefix, default=None):
        return {self.token: 0.9}


class Alternating(dict):
    """A script that alternates A and B forever ("A B A B ...")."""

    def get(self, prefix, default=None):
        return {B if prefix and prefix[-1] == A else A: 0.9}


def test_output_limits_take_the_smaller_bound():
    lengths = torch.tensor([2, 10, 60])
    assert output_limits(lengths, max_len_b=50).tolist() == [52, 60, 110]
    guarded = output_limits(lengths, max_len_b=50, max_len_a=1.5)
    assert guarded.tolist() == [3 + LENGTH_MARGIN, 15 + LENGTH_MARGIN, 90 + LENGTH_MARGIN]
    assert output_limits(lengths, max_len_b=3, max_len_a=1.5).tolist() == [5, 13, 63]


@pytest.mark.parametrize(
    ("row", "copies", "expected"),
    [
        ([C, A, A, A, A], 4, True),
        ([C, A, A, A], 4, False),
        ([A, B, A, B, A, B], 3, True),
        ([A, B, A, B, A, B], 4, False),
        ([A, B, C, A, B, C], 2, True),
        ([A, B, C, A, B, A], 2, False),
        ([A], 2, False),
    ],
)
def test_looping_finds_consecutive_copies(row, copies, expected):
    assert looping(torch.tensor([row]), copies).tolist() == [expected]


def _greedy(scripts, src, profile, **guards):
    decoder = ScriptedDecoder(scripts)
    return greedy_search(decoder, src, argmax=get_profile(profile).argmax, **guards)


def test_greedy_repetition_stop_ends_a_loop(profile):
    """A stuck sentence ends after four copies; a normal one beside it is unchanged."""
    scripts = {10: Loop(B), 11: {(): {A: 0.9}, (A,): {C: 0.9}, (A, C): {EOS_ID: 0.9}}}
    src = torch.tensor([[10, EOS_ID], [11, EOS_ID]])
    out = _greedy(scripts, src, profile, repeat_stop=4)
    assert out.tolist() == [[B, B, B, B, EOS_ID], [A, C, EOS_ID, PAD_ID, PAD_ID]]
    assert _greedy(scripts, src, profile).size(1) == 2 + 50  # unguarded: to the paper's bound


def test_greedy_repetition_stop_ends_a_loop_of_two(profile):
    out = _greedy({10: Alternating()}, torch.tensor([[10, EOS_ID]]), profile, repeat_stop=3)
    assert out.tolist() == [[A, B, A, B, A, B, EOS_ID]]


def test_greedy_length_guard(profile):
    src = torch.tensor([[10, 10, 10, EOS_ID], [10, EOS_ID, PAD_ID, PAD_ID]])
    out = _greedy({10: Alternating()}, src, profile, max_len_a=2.0)
    lengths = (out != PAD_ID).sum(dim=1).tolist()
    assert lengths == [math.ceil(2.0 * 4) + LENGTH_MARGIN, math.ceil(2.0 * 2) + LENGTH_MARGIN]


def test_beam_repetition_stop_and_length_guard(profile):
    extensions = get_profile(profile).extensions
    src = torch.tensor([[10, EOS_ID]])
    stopped = beam_search(
        ScriptedDecoder({10: Loop(C)}), src, beam=2, extensions=extensions, repeat_stop=4
    )
    assert stopped[0][0].tokens[:4] == [C] * 4
    assert len(stopped[0][0].tokens) <= 4
    bounded = beam_search(
        ScriptedDecoder({10: Alternating()}), src, beam=2, extensions=extensions, max_len_a=1.0
    )
    assert all(len(h.tokens) + 1 <= 2 + LENGTH_MARGIN for h in bounded[0])
    free = beam_search(ScriptedDecoder({10: Alternating()}), src, beam=2, extensions=extensions)
    assert max(len(h.tokens) for h in free[0]) > 2 + LENGTH_MARGIN


@pytest.mark.parametrize(
    ("text", "shouted"),
    [
        ("A MAN RIDES A BIKE.", True),
        ("NASA launched it.", False),
        ("NASA", False),
        ("I SAW NASA AND ESA", True),
        ("한국어 문장입니다", False),
        ("A Man Rides", False),
    ],
)
def test_is_shouted(text, shouted):
    assert is_shouted(text) is shouted


def test_in_known_case_picks_the_case_with_fewer_pieces():
    """A word is lower-cased unless its capitalised form is cut into fewer pieces."""
    known = {"ein", "Hund", "läuft"}

    def count(words):
        return [1 if w in known else len(w) for w in words]

    assert in_known_case(["EIN  HUND LÄUFT."], count) == ["Ein  Hund läuft."]


@pytest.fixture(scope="module")
def translator(trained_model_dir):
    return Translator.from_dir(trained_model_dir)


@pytest.mark.parametrize("text_mode", ["natural", "raw"])
def test_shouted_input_is_translated_in_the_known_case(translator, text_mode):
    shouted = "THE DOG RUNS ON THE STREET ."
    known = in_known_case([shouted], translator.count_pieces)[0]

    def first(line, **options):
        found = translator.translate([line], SearchOptions(beam=1, text=text_mode, **options))
        return found[0][0].text

    assert first(shouted, all_caps="restore") == first(known).upper()
    assert first(shouted, all_caps="known") == first(known)
    assert first("the dog runs .", all_caps="restore") == first("the dog runs .", all_caps="off")


def test_trained_model_records_its_length_ratio(trained_model_dir, tiny_dataset):
    """The reversing task's target has as many pieces as its source."""
    splits = json.loads((tiny_dataset / "manifest.json").read_text())["splits"]
    info = read_tokenizer_info(trained_model_dir)
    assert info.length_ratio == round(
        splits["train"]["tgt_tokens"] / splits["train"]["src_tokens"], 4
    )
    assert Translator.from_dir(trained_model_dir).length_ratio == info.length_ratio


@pytest.mark.parametrize(
    "fields",
    [
        {"max_len_ratio": -1.0},
        {"max_len_ratio": float("inf")},
        {"repeat_stop": 1},
        {"repeat_stop": -1},
        {"all_caps": "x"},
    ],
)
def test_bad_guard_options_are_refused(fields):
    with pytest.raises(ConfigError, match=next(iter(fields))):
        SearchOptions(**fields)
