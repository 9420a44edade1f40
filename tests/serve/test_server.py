"""``aiayn serve``: real servers on 127.0.0.1, driven by the clients people use
(libretranslatepy, deep-translator, openai) and by raw requests for every error case."""

from __future__ import annotations

import concurrent.futures
import gc
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.search_options import SearchOptions

httpx = pytest.importorskip("httpx", reason="the serve extra is a dev dependency")
pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")

from aiayn.serve.service import HEALTH  # noqa: E402

from .conftest import SENTENCES, Server, children, expected_translations  # noqa: E402


def test_libretranslatepy_translates_detects_and_lists_languages(server, en_de):
    from libretranslatepy import LibreTranslateAPI

    api = LibreTranslateAPI(server.url)
    assert api.translate(SENTENCES[0], "en", "de") == expected_translations(en_de, SENTENCES[:1])[0]
    assert [d["language"] for d in api.detect("the dog runs in the park")] == ["en", "de"]
    detected = api.detect("der Hund läuft im Park")
    assert detected[0]["language"] == "de"
    assert sum(d["confidence"] for d in detected) == pytest.approx(100, abs=0.05)
    assert [lang["code"] for lang in api.languages()] == ["en", "de"]


def test_libretranslate_aio_files_settings_suggestions_and_health(server, en_de, tmp_path):
    """The async client's every call: a text file is translated line by line (blank lines
    and spacing kept), the frontend settings describe this server, suggestions are refused
    (the server keeps none unless told), /health is ok."""
    import asyncio

    from libretranslate_aio import AsyncLibreTranslate
    from libretranslate_aio.exceptions import LibreTranslateError

    text = f"{SENTENCES[0]}\n\n  {SENTENCES[1]}\r\n{SENTENCES[2]}"
    expected = expected_translations(en_de, SENTENCES)
    (tmp_path / "notes.txt").write_text(text, encoding="utf-8", newline="")

    async def session():
        async with AsyncLibreTranslate(server.url, timeout=60) as client:
            done = await client.translate(SENTENCES[0], source="auto", target="de")
            url = (
                await client.translate_file(tmp_path / "notes.txt", "en", "de")
            ).translated_file_url
            settings = await client.frontend_settings()
            detected = await client.detect(SENTENCES[1])
            with pytest.raises(LibreTranslateError, match="Suggestions are disabled"):
                await client.suggest("the dog", "der hund", "en", "de")
            return done, url, settings, detected, await client.health()

    done, url, settings, detected, healthy = asyncio.run(session())
    assert done.translated_text == expected[0]
    assert done.detected_language.language == "en" and done.detected_language.confidence > 50
    download = httpx.get(url)
    assert download.status_code == 200
    assert download.headers["content-disposition"] == 'attachment; filename="notes.txt"'
    assert download.content.decode() == f"{expected[0]}\n\n  {expected[1]}\r\n{expected[2]}"
    assert settings.char_limit == 5000 and not settings.suggestions and not settings.key_required
    assert (
        settings.supported_files_format[0] == ".txt" and ".docx" in settings.supported_files_format
    )
    assert (settings.language.source.code, settings.language.target.code) == ("en", "de")
    assert detected[0].language == "en" and healthy
    assert httpx.get(server.url + "/download_file/nothing.txt").status_code == 404


@pytest.mark.parametrize(
    ("files", "data", "words"),
    [
        ({"file": ("a.pdf", b"dog")}, {"source": "en", "target": "de"}, "format not supported"),
        ({"file": ("a.txt", b"\xff\xfe")}, {"source": "en", "target": "de"}, "not UTF-8"),
        ({"file": ("a.txt", b" \n")}, {"source": "en", "target": "de"}, "empty file"),
        ({"file": ("a.txt", b"d" * 6000)}, {"source": "en", "target": "de"}, "exceeds text limit"),
        ({"file": ("a.txt", b"dog")}, {"source": "en"}, "missing target"),
        ({"file": ("a.txt", b"dog")}, {"source": "xx", "target": "de"}, "xx is not supported"),
        (None, {"source": "en", "target": "de"}, "missing file"),
    ],
)
def test_bad_files_get_a_clear_400(server, files, data, words):
    response = httpx.post(server.url + "/translate_file", files=files, data=data)
    assert response.status_code == 400
    assert words in response.json()["error"]


def test_deep_translator_translates(server, en_de):
    from deep_translator import LibreTranslator

    client = LibreTranslator(source="en", target="de", api_key="any", custom_url=server.url + "/")
    assert client.translate(SENTENCES[1]) == expected_translations(en_de, SENTENCES[1:2])[0]


def test_json_lists_alternatives_and_html(server, en_de):
    body = {"q": SENTENCES, "source": "auto", "target": "de", "alternatives": 2}
    answer = httpx.post(server.url + "/translate", json=body).json()
    assert answer["translatedText"] == expected_translations(en_de, SENTENCES)
    assert [len(a) for a in answer["alternatives"]] == [2, 2, 2]
    assert answer["detectedLanguage"][0]["language"] == "en"
    page = "<p class='x'>the dog runs</p> <b>cat sleeps</b><br>.<script>keep me</script>"
    body = {"q": page, "source": "en", "target": "de", "format": "html"}
    out = httpx.post(server.url + "/translate", json=body).json()["translatedText"]
    expected = expected_translations(en_de, ["the dog runs", "cat sleeps"])
    assert (
        out == f'<p class="x">{expected[0]}</p> <b>{expected[1]}</b><br/>.<script>keep me</script>'
    )


def test_a_paragraph_comes_back_whole_with_its_line_breaks(server, en_de):
    paragraph = "The dog runs. The cat sleeps.\n\nA man walks."
    body = {"q": paragraph, "source": "en", "target": "de"}
    out = httpx.post(server.url + "/translate", json=body).json()["translatedText"]
    one_a_line = expected_translations(en_de, ["The dog runs.", "The cat sleeps.", "A man walks."])
    assert out == f"{one_a_line[0]} {one_a_line[1]}\n\n{one_a_line[2]}"


def test_what_a_request_gets_never_depends_on_its_batch(server, en_de):
    texts = [
        f"{a} {b} near the {c}"
        for a in ("dog", "cat")
        for b in ("runs", "sleeps")
        for c in ("tree", "house", "park")
    ]
    expected = expected_translations(en_de, texts)
    before = httpx.get(server.url + "/health").json()

    def one(text: str) -> str:
        body = {"q": text, "source": "en", "target": "de"}
        return httpx.post(server.url + "/translate", json=body, timeout=60).json()["translatedText"]

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        got = list(pool.map(one, texts))
    after = httpx.get(server.url + "/health").json()
    assert set(HEALTH) <= set(after)  # named as the completions server names them
    assert got == expected
    batches, requests = after["batches"] - before["batches"], after["requests"] - before["requests"]
    assert requests == len(texts) and batches < requests  # some were decoded together


@pytest.mark.parametrize(
    ("kwargs", "status", "words"),
    [
        ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "JSON"),
        ({"json": [1, 2]}, 400, "object"),
        ({"json": {"source": "en", "target": "de"}}, 400, "missing q"),
        ({"json": {"q": "", "source": "en", "target": "de"}}, 400, "missing q"),
        ({"json": {"q": [], "source": "en", "target": "de"}}, 400, "missing q"),
        ({"json": {"q": 123, "source": "en", "target": "de"}}, 400, "string"),
        ({"json": {"q": ["a", 5], "source": "en", "target": "de"}}, 400, "string"),
        ({"json": {"q": "dog", "source": "xx", "target": "de"}}, 400, "xx is not supported"),
        ({"json": {"q": "dog", "source": "en", "target": "xx"}}, 400, "xx is not supported"),
        ({"json": {"q": "dog", "source": "en"}}, 400, "missing target"),
        ({"json": {"q": "dog", "target": "de", "format": "pdf"}}, 400, "format"),
        ({"json": {"q": "dog", "target": "de", "alternatives": 99}}, 400, "alternatives"),
        ({"json": {"q": "dog", "target": "de", "alternatives": "two"}}, 400, "alternatives"),
        ({"json": {"q": "d" * 6000, "target": "de"}}, 400, "exceeds text limit"),
        ({"data": {"q": "dog", "target": "de", "source": "fr"}}, 400, "fr is not supported"),
    ],
)
def test_malformed_requests_get_a_clear_4xx(server, kwargs, status, words):
    response = httpx.post(server.url + "/translate", **kwargs)
    assert response.status_code == status
    assert words in response.json()["error"]


def test_the_page_and_its_attention_picture(server):
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "<textarea" in page.text and "attention.png" in page.text
    params = {"q": "the dog runs", "translation": "runs dog the"}
    png = httpx.get(server.url + "/attention.png", params=params, timeout=60)
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    assert httpx.get(server.url + "/attention.png").status_code == 400


@pytest.mark.slow
def test_api_keys_cors_queue_and_time_outs(en_de, tmp_path):
    (tmp_path / "keys").write_text("# keys\nsecret-1\n")
    s = Server(
        en_de,
        "--api-keys",
        str(tmp_path / "keys"),
        "--queue-size",
        "1",
        "--max-wait-ms",
        "200",
        "--timeout",
        "0.1",
        "--suggestions",
        str(tmp_path / "suggested.jsonl"),
    )
    try:
        suggestion = {"q": "the dog", "s": "der hund", "source": "en", "target": "de"}
        assert httpx.post(s.url + "/suggest", data=suggestion).status_code == 403  # no key
        kept = httpx.post(s.url + "/suggest", data={**suggestion, "api_key": "secret-1"})
        assert kept.json() == {"success": True}
        assert [json.loads(line) for line in (tmp_path / "suggested.jsonl").open()] == [suggestion]
        assert (
            httpx.post(s.url + "/suggest", data={"q": "x", "api_key": "secret-1"}).status_code
            == 400
        )
        assert httpx.get(s.url + "/frontend/settings").json()["keyRequired"] is True
        body = {"q": "dog", "target": "de"}
        denied = httpx.post(s.url + "/translate", json=body)
        assert denied.status_code == 403 and denied.json()["error"] == "Invalid API key"
        assert httpx.post(s.url + "/translate", json={**body, "api_key": "bad"}).status_code == 403
        assert httpx.get(s.url + "/languages").status_code == 200  # no key needed to look
        preflight = httpx.options(
            s.url + "/translate",
            headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.headers["access-control-allow-origin"] in ("*", "https://example.org")

        def one(_):
            return httpx.post(
                s.url + "/translate", json={**body, "api_key": "secret-1"}, timeout=30
            )

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = [r.status_code for r in pool.map(one, range(32))]
        assert set(statuses) <= {200, 429, 503} and 429 in statuses and 503 in statuses
        errors = [r for r in map(one, range(1)) if r.status_code != 200]
        assert all("error" in r.json() for r in errors)
    finally:
        s.stop()


@pytest.mark.slow
def test_sigterm_finishes_every_accepted_request(en_de):
    s = Server(en_de, "--workers", "1")
    texts = [f"{word} {sentence}" for word in ("a", "the", "one") for sentence in SENTENCES]
    requests = [texts * 20, texts[::-1] * 20, texts * 15, texts[1:] * 20]  # ~1 s of work

    def one(q):
        return httpx.post(s.url + "/translate", json={"q": q, "target": "de"}, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        futures = [pool.submit(one, q) for q in requests]
        deadline = time.monotonic() + 30
        while httpx.get(s.url + "/health").json()["accepted"] < len(requests):
            assert time.monotonic() < deadline, "the requests were not accepted"
            time.sleep(0.02)  # until every request is decoding or queued
        assert not all(f.done() for f in futures)
        s.proc.send_signal(signal.SIGTERM)
        responses = [f.result() for f in futures]
    assert [r.status_code for r in responses] == [200] * len(requests)
    expected = expected_translations(en_de, texts)
    by_text = dict(zip(texts, expected, strict=True))
    for q, response in zip(requests, responses, strict=True):
        assert response.json()["translatedText"] == [by_text[t] for t in q]
    assert f"answered {len(requests)} translation requests" in s.stop()
    with pytest.raises(httpx.TransportError):  # it no longer accepts connections
        httpx.get(s.url + "/health", timeout=2)


@pytest.mark.slow
def test_a_dead_decoding_process_is_replaced(en_de):
    s = Server(en_de, "--workers", "1")
    try:
        decoders = [p for p in children(s.proc.pid) if b"spawn_main" in _cmdline(p)]
        assert len(decoders) == 1
        os.kill(decoders[0], signal.SIGKILL)
        body = {"q": SENTENCES[0], "source": "en", "target": "de"}
        first = httpx.post(s.url + "/translate", json=body, timeout=60)
        assert first.status_code == 503 and "retry" in first.json()["error"]
        again = httpx.post(s.url + "/translate", json=body, timeout=60)
        assert again.json()["translatedText"] == expected_translations(en_de, SENTENCES[:1])[0]
    finally:
        s.stop()


@pytest.mark.slow
def test_decoding_processes_end_with_a_killed_server(en_de):
    s = Server(en_de, "--workers", "2")
    decoders = [p for p in children(s.proc.pid) if b"spawn_main" in _cmdline(p)]
    assert len(decoders) == 2
    s.proc.kill()
    s.proc.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() for p in decoders):
        assert time.monotonic() < deadline, "decoding processes outlived their server"
        time.sleep(0.1)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_settings_built_in_code_resolve_auto_and_refuse_an_unknown_precision(en_de):
    from fastapi.testclient import TestClient

    from aiayn.runtime import resolve_precision
    from aiayn.serve.app import create_app
    from aiayn.serve.service import Service
    from aiayn.serve.settings import ServeSettings

    resolved = resolve_precision("auto", torch.device("cpu"))
    auto = SearchOptions(precision="auto")
    settings = ServeSettings(models=(str(en_de),), decode=auto, workers=1)
    models = _transformers()
    app = create_app(settings)
    assert isinstance(app.state.service, Service)
    with TestClient(app) as client:
        answer = client.post("/translate", json={"q": SENTENCES, "target": "de"})
        params = {"q": "the dog runs", "translation": "runs dog the"}
        assert client.get("/attention.png", params=params).content.startswith(b"\x89PNG")
        # the models live in the decoding processes only, the picture's included
        assert _transformers() == models
    assert answer.status_code == 200, answer.text
    expected = expected_translations(en_de, SENTENCES, precision=resolved)
    assert answer.json()["translatedText"] == expected
    refused = r"^SearchOptions.precision must be one of fp32, bf16, int8, auto, got 'fp16'$"
    with pytest.raises(AiaynError, match=refused):
        ServeSettings(models=(str(en_de),), decode=SearchOptions(precision="fp16"))


def _transformers() -> int:
    """Translation models alive in this process."""
    from aiayn.models import Transformer

    gc.collect()
    return sum(type(o) is Transformer for o in gc.get_objects())


@pytest.mark.slow
def test_several_models_each_under_its_language_pair(en_de, fr_de, tmp_path):
    """Two models in one server: ``/languages`` lists both pairs, each request is decoded
    by the model of its pair (``source: auto`` by the language lingua finds); a second model
    for a pair is refused."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.settings import ServeSettings

    english, french = "the dog runs in the park", "le chien court dans le jardin"
    by = {"en": en_de, "fr": fr_de}
    expected = {
        (lang, text): expected_translations(by[lang], [text])[0]
        for lang in by
        for text in (english, french)
    }
    assert expected["en", english] != expected["fr", english]  # the test tells them apart

    settings = ServeSettings(models=(str(en_de), str(fr_de)), workers=1)
    with TestClient(create_app(settings)) as client:
        languages = {lang["code"]: lang["targets"] for lang in client.get("/languages").json()}
        assert languages == {"en": ["de"], "fr": ["de"], "de": []}
        for source in ("fr", "en"):
            body = {"q": english, "source": source, "target": "de"}
            answer = client.post("/translate", json=body).json()
            assert answer["translatedText"] == expected[source, english]
        for source, text in (("fr", french), ("en", english)):
            body = {"q": text, "source": "auto", "target": "de"}
            answer = client.post("/translate", json=body).json()
            assert answer["translatedText"] == expected[source, text]
            assert answer["detectedLanguage"]["language"] == source
        unknown = client.post("/translate", json={"q": "dog", "source": "en", "target": "es"})
        assert unknown.status_code == 400
        assert (
            unknown.json()["error"] == "es is not supported (from en this server translates to de)"
        )

    twin = tmp_path / "twin"
    shutil.copytree(en_de, twin)
    with pytest.raises(AiaynError, match=r"^.*twin: a second model for en-de \(already .*en-de\)$"):
        create_app(ServeSettings(models=(str(en_de), str(twin))))
