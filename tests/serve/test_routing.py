"""Mixed-language batches (``source: auto`` detects each text on its own and sends it to its
model), ``/detect`` with a list, and pairs translated through English (listed, on the page,
equal to the two models one after the other; a direct model wins)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")

from .conftest import expected_translations


def _renamed(model: Path, where: Path, source: str, target: str) -> Path:
    """The test translator under another language pair (its weights unchanged)."""
    copy = where / f"{source}-{target}"
    shutil.copytree(model, copy)
    info = json.loads((copy / "tokenizer.json").read_text())
    (copy / "tokenizer.json").write_text(
        json.dumps({**info, "src_lang": source, "tgt_lang": target})
    )
    return copy


@pytest.fixture(scope="module")
def models(en_de, fr_de, tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("routing")
    return {
        "en-de": en_de,
        "fr-de": fr_de,
        "fr-en": _renamed(en_de, where, "fr", "en"),
        "it-en": _renamed(en_de, where, "it", "en"),
    }


@pytest.fixture(scope="module")
def client(models):
    """A server of en->de, fr->de, fr->en and it->en (it->de only through English)."""
    from fastapi.testclient import TestClient

    from aiayn.search_options import SearchOptions
    from aiayn.serve.app import create_app
    from aiayn.serve.settings import ServeSettings

    models = tuple(map(str, models.values()))
    settings = ServeSettings(models=models, workers=1, decode=SearchOptions(beam=2))
    with TestClient(create_app(settings)) as client:
        yield client


def _lines(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def test_a_mixed_batch_sends_each_line_to_its_model(client, models, multi30k_dir):
    english = _lines(multi30k_dir / "test_2016_flickr.en.gz", 20)
    french = _lines(multi30k_dir / "test_2016_flickr.fr.gz", 20)
    batch = [line for pair in zip(english, french, strict=True) for line in pair]
    answer = client.post("/translate", json={"q": batch, "source": "auto", "target": "de"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "fr"] * 20
    assert body["translatedText"][0::2] == expected_translations(models["en-de"], english, beam=2)
    assert body["translatedText"][1::2] == expected_translations(models["fr-de"], french, beam=2)


def test_detect_takes_a_list(client):
    texts = ["A man is riding a bicycle.", "Un homme fait du vélo."]
    detected = client.post("/detect", json={"q": texts}).json()
    assert [d[0]["language"] for d in detected] == ["en", "fr"]
    single = client.post("/detect", json={"q": texts[0]}).json()
    assert single[0]["language"] == "en"


def test_a_pair_without_a_model_goes_through_english(client, models):
    texts = ["the dog runs", "a big red ball near the tree"]
    languages = {lang["code"]: lang for lang in client.get("/languages").json()}
    answer = client.post("/translate", json={"q": texts, "source": "it", "target": "de"})
    assert languages["it"]["targets"] == ["en", "de"]
    assert languages["it"]["pivot"] == {"de": "en"} and "pivot" not in languages["en"]
    assert "Italian &rarr; German (through English: two decodes)" in client.get("/").text
    between = expected_translations(models["it-en"], texts, beam=2)
    assert answer.json()["translatedText"] == expected_translations(
        models["en-de"], between, beam=2
    )


def test_a_direct_model_wins_over_english(client, models):
    languages = {lang["code"]: lang for lang in client.get("/languages").json()}
    answer = client.post("/translate", json={"q": ["the dog runs"], "source": "fr", "target": "de"})
    assert "pivot" not in languages["fr"]
    expected = expected_translations(models["fr-de"], ["the dog runs"], beam=2)
    assert answer.json()["translatedText"] == expected


def test_no_route_is_still_a_clear_400(client):
    answer = client.post("/translate", json={"q": "x", "source": "de", "target": "en"})
    assert answer.status_code == 400 and "de is not supported" in answer.json()["error"]


def test_the_command_line_routes_each_line_and_pivots(models, multi30k_dir, tmp_path, capsys):
    """``aiayn translate`` with several --model: --source auto per line, and it -> de
    through English, each equal to the models one after the other."""
    from aiayn.cli import main

    english = _lines(multi30k_dir / "test_2016_flickr.en.gz", 3)
    french = _lines(multi30k_dir / "test_2016_flickr.fr.gz", 3)
    source = tmp_path / "mixed.txt"
    source.write_text("\n".join([*english, *french]) + "\n", encoding="utf-8")
    out = tmp_path / "mixed.de"
    argv = ["translate", *(f"--model={m}" for m in models.values()), "--beam", "2"]
    assert main([*argv, "--target", "de", "-i", str(source), "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:3] == expected_translations(models["en-de"], english, beam=2)
    assert lines[3:] == expected_translations(models["fr-de"], french, beam=2)
    source.write_text("the dog runs\n", encoding="utf-8")
    assert main([*argv, "--source", "it", "--target", "de", "-i", str(source), "-o", str(out)]) == 0
    between = expected_translations(models["it-en"], ["the dog runs"], beam=2)
    assert out.read_text(encoding="utf-8").splitlines() == expected_translations(
        models["en-de"], between, beam=2
    )
    assert main([*argv, "--source", "de", "--target", "en", "-i", str(source)]) == 2
    assert "no model, nor two through en, for de-en" in capsys.readouterr().err


def test_the_command_line_and_the_server_route_a_mixed_list_alike(
    client, models, multi30k_dir, tmp_path
):
    """One routing (``aiayn.translate.routing``): the same list, with lines without a letter
    among English and French ones, comes back the same from ``aiayn translate --source auto``
    and from the server's ``source: auto``."""
    from aiayn.cli import main

    english = _lines(multi30k_dir / "test_2016_flickr.en.gz", 2)
    french = _lines(multi30k_dir / "test_2016_flickr.fr.gz", 3)
    mixed = [english[0], "2024", french[0], "42 %", french[1], english[1], french[2], "7."]
    answer = client.post("/translate", json={"q": mixed, "source": "auto", "target": "de"})
    assert answer.status_code == 200, answer.text
    served = answer.json()
    found = [d["language"] for d in served["detectedLanguage"]]
    assert found == ["en", "fr", "fr", "fr", "fr", "en", "fr", "fr"]  # the others' most common
    source, out = tmp_path / "mixed.txt", tmp_path / "mixed.de"
    source.write_text("\n".join(mixed) + "\n", encoding="utf-8")
    argv = ["translate", *(f"--model={m}" for m in models.values()), "--beam", "2"]
    assert main([*argv, "--target", "de", "-i", str(source), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == served["translatedText"]


def test_auto_finds_a_language_served_only_through_english(client, models):
    """it -> de has no model of its own; ``source: auto`` still finds Italian and routes it
    through English, not to the closest language with a direct model."""
    text = "Un uomo sta andando in bicicletta lungo la strada."
    answer = client.post("/translate", json={"q": text, "source": "auto", "target": "de"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["detectedLanguage"]["language"] == "it"
    between = expected_translations(models["it-en"], [text], beam=2)
    assert (
        answer.json()["translatedText"]
        == expected_translations(models["en-de"], between, beam=2)[0]
    )


def test_a_glossary_applies_through_english(client, models):
    """it -> de through English with a glossary of Italian terms: the first leg keeps the
    term verbatim (a protected span), the second imposes its target."""
    texts = ["the dog runs near the tree"]
    body = {"q": texts, "source": "it", "target": "de", "glossary": {"dog": "house"}}
    answer = client.post("/translate", json=body).json()["translatedText"]
    assert "house" in answer[0]
    plain = client.post("/translate", json={k: v for k, v in body.items() if k != "glossary"})
    plain = plain.json()
    assert "house" not in plain["translatedText"][0]
