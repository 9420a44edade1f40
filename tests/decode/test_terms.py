"""Protected spans, glossaries and confidence through the Translator, on the tiny trained
model (it reverses short sentences of a small vocabulary)."""

import dataclasses
import math

import pytest
import torch

from aiayn.errors import ConfigError
from aiayn.text import protect
from aiayn.text.glossary import Glossary
from aiayn.translate.terms import constraints_of, mark
from aiayn.translate.translator import SearchOptions, TranslationError, Translator

GREEDY = SearchOptions(beam=1)
BEAM = SearchOptions(beam=3)
LINES = ["the dog runs on the street .", "a small cat sleeps under the big tree", ""]


@pytest.fixture(scope="module")
def translator(trained_model_dir):
    return Translator.from_dir(trained_model_dir)


def _teacher_forced_confidence(translator, line, tokens):
    """exp(mean log-probability of ``tokens`` + EOS) by the model's forward pass."""
    model, specials = translator.model, translator.model.specials
    src = torch.tensor([[*translator.src_tokenizer.encode([line])[0], specials.eos]])
    tgt = torch.tensor([[specials.bos, *tokens]])
    with torch.no_grad():
        logp = model(src, tgt).float()[0].log_softmax(-1)  # (T, V)
    picked = logp.gather(1, torch.tensor([*tokens, specials.eos])[:, None])
    return math.exp(picked.mean().item())


@pytest.mark.parametrize("options", [GREEDY, BEAM], ids=["greedy", "beam"])
def test_the_confidence_is_the_geometric_mean_of_the_emitted_tokens_probabilities(
    translator, options
):
    results = translator.translate(LINES, dataclasses.replace(options, text="raw"))
    for line, [best] in zip(LINES[:2], results, strict=False):
        assert 0 < best.confidence <= 1
        expected = _teacher_forced_confidence(translator, line, best.tokens)
        assert best.confidence == pytest.approx(expected, rel=1e-3)
    assert results[2][0].confidence == 1.0  # nothing to translate: certain


def test_a_line_of_sentences_takes_the_tokens_mean_of_its_sentences(translator):
    [[one]] = translator.translate([LINES[0]], BEAM)
    [[two]] = translator.translate([f"{LINES[1].capitalize()}."], BEAM)
    [[both]] = translator.translate([f"{LINES[0]} {LINES[1].capitalize()}."], BEAM)
    assert (
        min(one.confidence, two.confidence)
        <= both.confidence
        <= max(one.confidence, two.confidence)
    )
    assert [s.confidence for s in both.sentences] == pytest.approx(
        [one.confidence, two.confidence], rel=1e-3
    )  # each sentence keeps its own, as the page shows them
    first, second = both.sentences
    assert first.text == one.text and both.text.index(second.text) > len(first.text) - 1


def test_a_translation_not_cut_into_sentences_is_one(translator):
    [[raw]] = translator.translate([LINES[0]], dataclasses.replace(BEAM, text="raw"))
    [[flagged]] = translator.translate([LINES[0]], dataclasses.replace(BEAM, min_confidence=1.0))
    for found in (raw, flagged):
        [only] = found.by_sentence()
        assert (only.text, only.confidence) == (found.text, found.confidence)


def test_below_the_minimum_confidence_the_source_comes_back_flagged(translator):
    found = translator.translate(LINES[:2], dataclasses.replace(BEAM, min_confidence=1.0))
    assert [h[0].text for h in found] == LINES[:2]
    assert all(h[0].flagged and h[0].confidence < 1 for h in found)
    kept = translator.translate(LINES[:2], dataclasses.replace(BEAM, min_confidence=0.0))
    assert not any(h[0].flagged for h in kept)
    threshold = sorted(h[0].confidence for h in kept)
    split = translator.translate(
        LINES[:2], dataclasses.replace(BEAM, min_confidence=sum(threshold) / 2)
    )
    assert sorted(h[0].flagged for h in split) == [False, True]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"min_confidence": 1.5}, "min_confidence must be a number from 0 to 1"),
        ({"min_confidence": float("nan")}, "min_confidence"),
        ({"min_confidence": -0.1}, "min_confidence must be a number from 0 to 1"),
        ({"protect_patterns": ["x"]}, "tuple of non-empty strings"),
        ({"protect": "yes"}, "must be true or false"),
        ({"glossary": {"dog": "Hund"}}, "Glossary"),
    ],
)
def test_bad_term_options_are_one_line(changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as e:
        SearchOptions(**changes)
    assert "\n" not in str(e.value)


def test_a_pattern_that_does_not_compile_is_one_line(translator):
    with pytest.raises(TranslationError, match="does not compile") as e:
        translator.translate(["the dog"], SearchOptions(protect_patterns=("(unclosed",)))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("options", [GREEDY, BEAM], ids=["greedy", "beam"])
def test_a_glossary_term_is_imposed(translator, options):
    line = "the dog runs on the street ."
    [[plain]] = translator.translate([line], options)
    assert "house" not in plain.text
    glossary = Glossary.from_pairs([("dog", "house")])
    [[forced]] = translator.translate([line], dataclasses.replace(options, glossary=glossary))
    assert "house" in forced.text.lower()
    house = translator.tgt_tokenizer.encode(["house"])[0]
    assert any(forced.tokens[i : i + len(house)] == house for i in range(len(forced.tokens)))
    assert 0 < forced.confidence <= 1


def test_a_protected_span_stands_where_the_model_puts_its_sentinel(translator, monkeypatch):
    monkeypatch.setattr(protect, "SENTINELS", ("house",))  # a word this model copies
    [[found]] = translator.translate(["the dog {{name}} runs ."], BEAM)
    assert found.text.count("{{name}}") == 1
    [[reference]] = translator.translate(["the dog house runs ."], BEAM)
    assert found.text == reference.text.replace("house", "{{name}}")


def test_an_imposed_sentinel_is_written_by_the_search_itself(translator, monkeypatch):
    monkeypatch.setattr(protect, "SENTINELS", ("ball",))
    line = "the dog {{name}} runs ."
    [[free]] = translator.translate([line.replace("{{name}}", "ball")], BEAM)
    imposed = dataclasses.replace(BEAM, impose_spans=True)
    for options in (imposed, dataclasses.replace(imposed, beam=1)):  # greedy: constrained beam
        [[found]] = translator.translate([line], options)
        ball = translator.tgt_tokenizer.encode(["ball"])[0]
        assert any(found.tokens[i : i + len(ball)] == ball for i in range(len(found.tokens)))
        assert found.text.count("{{name}}") == 1
    if "ball" not in free.text.split():  # the model drops it unimposed: placed where it stood
        [[unimposed]] = translator.translate([line], BEAM)
        assert unimposed.text.count("{{name}}") == 1


def test_sentinels_are_constraints_only_when_imposed(translator, monkeypatch):
    monkeypatch.setattr(protect, "SENTINELS", ("ball",))  # a word this model can spell
    [marked] = mark(["a {x} b"], ["line 1"], protect=True, patterns=(), glossary=None)
    tokenizer, prepare = translator.tgt_tokenizer, translator.tgt_text.prepare
    assert constraints_of([marked], prepare, tokenizer, print, spans=False) == [[]]
    [[ids]] = constraints_of([marked], prepare, tokenizer, print, spans=True)
    assert ids == tokenizer.encode([prepare(marked.masked.spans[0].sentinel)])[0]


@pytest.mark.parametrize("impose", [False, True], ids=["copied", "imposed"])
def test_every_span_comes_back_once_even_where_the_model_cannot_spell_its_sentinel(
    translator, impose
):
    line = "the dog %(count)d runs to https://example.org/a?b=1 , a.b@example.com {0} ."
    warnings = []
    options = dataclasses.replace(BEAM, impose_spans=impose)
    [[found]] = translator.translate([line], options, warn=warnings.append)
    for span in ("%(count)d", "https://example.org/a?b=1", "a.b@example.com", "{0}"):
        assert found.text.count(span) == 1
    off = dataclasses.replace(BEAM, protect=False)
    [[unprotected]] = translator.translate([line], off)
    assert "https://example.org/a?b=1" not in unprotected.text


def test_an_unbalanced_placeholder_is_one_line_naming_the_line(translator):
    with pytest.raises(TranslationError, match=r"line 2: unbalanced placeholder '\{\{'"):
        translator.translate(["the dog .", "the {{name dog ."], BEAM)
    [[found]] = translator.translate(["the {{name dog ."], dataclasses.replace(BEAM, protect=False))
    assert isinstance(found.text, str)


def test_a_user_pattern_is_protected(translator):
    options = dataclasses.replace(BEAM, protect_patterns=(r"ACME-\d+",))
    [[found]] = translator.translate(["the dog ACME-42 runs ."], options)
    assert found.text.count("ACME-42") == 1


def test_constrained_sentences_translate_alike_alone_and_in_a_batch(translator):
    """Through the model's KV cache: a batch of constrained and free sentences gives each
    sentence what it gets alone, every constraint met."""
    ids = translator.src_tokenizer.encode([*LINES[:2], "the cat sits"])
    house = translator.tgt_tokenizer.encode(["house"])[0]
    ball = translator.tgt_tokenizer.encode(["ball"])[0]
    constraints = [[house], [], [ball, house]]
    together = translator.translate_ids(ids, BEAM, constraints=constraints)
    for row, terms, found in zip(ids, constraints, together, strict=True):
        [alone] = translator.translate_ids([row], BEAM, constraints=[terms])
        assert alone[0].tokens == found[0].tokens
        for term in terms:
            tokens = found[0].tokens
            assert any(tokens[i : i + len(term)] == term for i in range(len(tokens)))
