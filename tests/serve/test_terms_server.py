"""The LibreTranslate API's confidence, minimum confidence, glossary and protected spans
(request fields and server defaults), and their bad values as one-line 400s."""

import pytest

from aiayn.errors import AiaynError
from aiayn.search_options import SearchOptions

pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")

LINES = ["the dog runs on the street .", "a small cat sleeps under the big tree"]


@pytest.fixture(scope="module")
def client(en_de):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.settings import ServeSettings
    from aiayn.text.glossary import Glossary

    glossary = Glossary.from_pairs([("tree", "ball")])
    decode = SearchOptions(beam=3, glossary=glossary)
    settings = ServeSettings(models=(str(en_de),), workers=1, decode=decode)
    with TestClient(create_app(settings)) as client:
        yield client


def _post(client, **body):
    return client.post("/translate", json={"source": "en", "target": "de", **body})


def test_every_translation_carries_its_confidence(client):
    single = _post(client, q=LINES[0]).json()
    assert 0 < single["confidence"] <= 1 and "flagged" not in single
    listed = _post(client, q=LINES).json()
    assert len(listed["confidence"]) == 2
    assert listed["confidence"][0] == pytest.approx(single["confidence"], abs=1e-4)


def test_each_sentence_carries_its_own_confidence_for_the_page(client):
    two = f"{LINES[0]} {LINES[1].capitalize()}."
    single = _post(client, q=two).json()
    text, sentences = single["translatedText"], single["sentences"]
    assert len(sentences) == 2 and all(0 < s["confidence"] <= 1 for s in sentences)
    first = text.index(sentences[0]["text"])  # the page finds each in the text, in order
    assert text.index(sentences[1]["text"], first + len(sentences[0]["text"])) >= 0
    low, high = sorted(s["confidence"] for s in sentences)
    assert low <= single["confidence"] <= high  # the text's is their tokens' mean
    listed = _post(client, q=[LINES[0], two]).json()
    assert [len(s) for s in listed["sentences"]] == [1, 2]
    assert listed["sentences"][1] == sentences
    [alone] = listed["sentences"][0]
    assert alone["text"] == listed["translatedText"][0]
    assert alone["confidence"] == listed["confidence"][0]
    flagged = _post(client, q=two, min_confidence=1).json()
    assert flagged["sentences"] == [{"text": two, "confidence": flagged["confidence"]}]


def test_below_min_confidence_the_source_comes_back_flagged(client):
    answer = _post(client, q=LINES, min_confidence=1).json()
    assert answer["translatedText"] == LINES and answer["flagged"] == [True, True]
    form = client.post(
        "/translate", data={"q": LINES[0], "source": "en", "target": "de", "min_confidence": "0"}
    ).json()
    assert form["translatedText"] != LINES[0]


def test_a_request_glossary_joins_the_servers(client):
    answer = _post(client, q=LINES[1], glossary={"cat": "house"}).json()
    text = answer["translatedText"].lower()
    assert "house" in text and "ball" in text  # the request's term and the server's
    tsv = _post(client, q=LINES[0], glossary="dog\thouse").json()
    assert "house" in tsv["translatedText"].lower()


def test_protected_spans_and_request_patterns(client):
    answer = _post(client, q="the dog {{name}} runs ACME-42", protect="ACME-\\d+").json()
    assert answer["translatedText"].count("{{name}}") == 1
    assert answer["translatedText"].count("ACME-42") == 1
    off = _post(client, q="the {{dog runs", protect_spans=False)
    assert off.status_code == 200


@pytest.mark.parametrize(
    "body, message",
    [
        ({"min_confidence": 2}, "min_confidence must be a number from 0 to 1"),
        ({"min_confidence": "high"}, "min_confidence must be a number"),
        ({"protect": "(ab"}, "does not compile"),
        ({"protect": 5}, "protect must be a regex"),
        ({"glossary": {}}, "glossary: no terms"),
        ({"glossary": "no tab here"}, "glossary: line 1"),
        ({"glossary": [["dog", ""]]}, "empty target term"),
        ({"glossary": 3}, "glossary must be"),
        ({"protect_spans": "maybe"}, "protect_spans must be true or false"),
        ({"q": "the {{dog runs"}, "unbalanced placeholder '{{'"),
    ],
)
def test_bad_values_are_a_one_line_400(client, body, message):
    answer = _post(client, **{"q": LINES[0], **body})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert message in error and "\n" not in error


def test_a_not_a_number_minimum_is_a_one_line_400(client):
    body = '{"q": "the dog", "source": "en", "target": "de", "min_confidence": NaN}'
    answer = client.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and "min_confidence" in answer.json()["error"]
    form = client.post(
        "/translate",
        data={"q": "the dog", "source": "en", "target": "de", "min_confidence": "-0.1"},
    )
    assert form.status_code == 400, form.text
    assert "min_confidence must be a number from 0 to 1" in form.json()["error"]


@pytest.mark.parametrize(
    "fields, text, message",
    [
        ({"min_confidence": "2"}, "the dog runs", "min_confidence must be a number from 0 to 1"),
        ({"protect": "(ab"}, "the dog runs", "does not compile"),
        ({"glossary": "no tab here"}, "the dog runs", "glossary: line 1"),
        ({"glossary": ""}, "the dog runs", "glossary: no terms"),
        ({}, "the dog runs\nthe {{dog runs", "unbalanced placeholder '{{'"),
        ({"retranslate": "maybe"}, "the dog runs", "retranslate"),
    ],
)
def test_translate_file_bad_values_are_a_one_line_400(client, fields, text, message):
    answer = client.post(
        "/translate_file",
        data={"source": "en", "target": "de", **fields},
        files={"file": ("lines.txt", text.encode(), "text/plain")},
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert message in error and "\n" not in error


def test_bad_server_defaults_are_refused_at_start(en_de):
    from aiayn.serve.settings import ServeSettings

    with pytest.raises(AiaynError, match=r"SearchOptions\.min_confidence"):
        SearchOptions(min_confidence=-0.1)
    with pytest.raises(AiaynError, match="does not compile"):
        ServeSettings(models=(str(en_de),), decode=SearchOptions(protect_patterns=("[",)))


def test_a_request_s_tsv_glossary_reads_as_a_file_does(client):
    """``#`` comments, blank lines and a byte-order mark, as a glossary file allows."""
    tsv = "\ufeff# our terms\n\ndog\thouse\n"
    answer = _post(client, q=LINES[0], glossary=tsv)
    assert answer.status_code == 200, answer.text
    assert "house" in answer.json()["translatedText"].lower()
    bad = _post(client, q=LINES[0], glossary="dog house\n")
    assert bad.status_code == 400 and "line 1: expected" in bad.json()["error"]


def test_a_request_with_too_many_protect_patterns_is_a_400(client):
    from aiayn.serve.libretranslate_requests import MAX_REQUEST_PATTERNS

    many = ["x+"] * (MAX_REQUEST_PATTERNS + 1)
    answer = _post(client, q=LINES[0], protect=many)
    assert answer.status_code == 400 and f"at most {MAX_REQUEST_PATTERNS}" in answer.json()["error"]
