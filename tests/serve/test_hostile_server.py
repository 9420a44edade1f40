"""The server under hostile clients: every request that is wrong gets a 4xx with a message that
says why (never a 500, never a traceback, never a silently wrong answer), a bad request never
fails the requests decoded with it, a worker that dies is replaced, and 32 clients mixing
hostile requests into good ones all get their right answers with bounded memory.

Each parametrised case is (name, method, path, request keywords, expected status, words).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from aiayn.serve.service import HEALTH

from .conftest import (
    SENTENCES,
    children,
    end_server,
    expected_translations,
    httpx,
    start_server,
    wait_until_healthy,
)

GOOD = {"q": "the dog runs", "source": "en", "target": "de"}
JSON = {"content-type": "application/json"}


def _raw(text: str) -> dict:
    """A body sent as these exact characters (JSON that ``json=`` could not write)."""
    return {"content": text.encode("utf-8", "surrogatepass"), "headers": JSON}


class PortZeroServer:
    """``aiayn serve --port 0``: the port it prints is the one it listens on."""

    def __init__(self, model: Path, *options: str):
        self.proc = start_server(["--model", str(model), "--port", "0", *options])
        try:
            self.url = self._address()
            wait_until_healthy(self.proc, self.url)
        except BaseException:  # it never answered: end it here, not at exit
            end_server(self.proc)
            raise
        self._drain = threading.Thread(target=self.proc.stderr.read, daemon=True)
        self._drain.start()

    def _address(self) -> str:
        said = []  # the loading lines come first, then the address
        while not (found := re.search(r"http://127\.0\.0\.1:(\d+)/", said[-1] if said else "")):
            said.append(self.proc.stderr.readline())
            assert said[-1] and len(said) < 50, "".join(said)
        assert found.group(1) != "0", said[-1]
        return f"http://127.0.0.1:{found.group(1)}"

    def stop(self) -> None:
        end_server(self.proc, 60)
        assert self.proc.returncode in (0, -signal.SIGTERM)


@pytest.fixture(scope="module")
def translator_server(en_de, tmp_path_factory):
    suggestions = tmp_path_factory.mktemp("suggest") / "suggested.jsonl"
    s = PortZeroServer(
        en_de, "--workers", "2", "--timeout", "120", "--suggestions", str(suggestions)
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def lm_server(lm_dir):
    s = PortZeroServer(lm_dir, "--workers", "1", "--timeout", "20")
    yield s
    s.stop()


LIBRETRANSLATE_CASES = [
    (
        "lone surrogate in q",
        "POST",
        "/translate",
        _raw('{"q": "\\ud800", "target": "de"}'),
        400,
        "lone surrogate",
    ),
    (
        "lone surrogate in a list",
        "POST",
        "/translate",
        _raw('{"q": ["fine", "x\\udfff"], "target": "de"}'),
        400,
        "lone surrogate",
    ),
    (
        "alternatives Infinity",
        "POST",
        "/translate",
        _raw('{"q": "dog", "target": "de", "alternatives": Infinity}'),
        400,
        "whole number",
    ),
    (
        "alternatives NaN",
        "POST",
        "/translate",
        _raw('{"q": "dog", "target": "de", "alternatives": NaN}'),
        400,
        "whole number",
    ),
    (
        "alternatives 1.9",
        "POST",
        "/translate",
        {"json": {"q": "dog", "target": "de", "alternatives": 1.9}},
        400,
        "whole number",
    ),
    (
        "alternatives true",
        "POST",
        "/translate",
        {"json": {"q": "dog", "target": "de", "alternatives": True}},
        400,
        "whole number",
    ),
    (
        "JSON 30,000 deep",
        "POST",
        "/translate",
        _raw('{"q": ' + "[" * 30_000 + "]" * 30_000 + "}"),
        400,
        "nested deeper",
    ),
    (
        "api_key a list",
        "POST",
        "/translate",
        {"json": {**GOOD, "api_key": ["k"]}},
        400,
        "api_key must be a string",
    ),
    (
        "api_key an object",
        "POST",
        "/translate",
        {"json": {**GOOD, "api_key": {"k": 1}}},
        400,
        "api_key must be a string",
    ),
    (
        "source a list",
        "POST",
        "/translate",
        {"json": {**GOOD, "source": ["en"]}},
        400,
        "source must be a string",
    ),
    (
        "target a number",
        "POST",
        "/translate",
        {"json": {**GOOD, "target": 7}},
        400,
        "target must be a string",
    ),
    (
        "body not UTF-8",
        "POST",
        "/translate",
        {"content": b"\xff\xfe{", "headers": JSON},
        400,
        "not UTF-8",
    ),
    (
        "JSON as text/plain",
        "POST",
        "/translate",
        {"content": json.dumps(GOOD), "headers": {"content-type": "text/plain"}},
        200,
        "translatedText",
    ),
    (
        "JSON as curl's form type",
        "POST",
        "/translate",
        {
            "content": json.dumps(GOOD),
            "headers": {"content-type": "application/x-www-form-urlencoded"},
        },
        200,
        "translatedText",
    ),
    (
        "XML as text/plain",
        "POST",
        "/translate",
        {"content": "<q>dog</q>", "headers": {"content-type": "text/plain"}},
        400,
        "send JSON",
    ),
    (
        "zero-width q",
        "POST",
        "/translate",
        {"json": {**GOOD, "q": "\u200b\u200c\ufeff"}},
        200,
        '"translatedText":""',
    ),
    (
        "attention picture over its own limit",
        "GET",
        "/attention.png",
        {"params": {"q": "the dog runs " * 40, "translation": "x"}},
        400,
        "longer than",
    ),
    ("detect with a surrogate", "POST", "/detect", _raw('{"q": "\\ud800"}'), 400, "lone surrogate"),
    (
        "suggest with a surrogate",
        "POST",
        "/suggest",
        _raw('{"q": "dog", "s": "\\ud800", "source": "en", "target": "de"}'),
        400,
        "lone surrogate",
    ),
    (
        "digits only, source auto",
        "POST",
        "/translate",
        {"json": {"q": "12345 678", "source": "auto", "target": "de"}},
        400,
        "no language identified",
    ),
    (
        "1,600 nested <b> within the limit",
        "POST",
        "/translate",
        {"json": {**GOOD, "q": "<b>" * 1600 + "the dog " * 25, "format": "html"}},
        400,
        "nested deeper",
    ),
    (
        "HTML with alternatives",
        "POST",
        "/translate",
        {"json": {**GOOD, "q": "<p>the dog runs</p>", "format": "html", "alternatives": 2}},
        200,
        '"alternatives":["<p>',
    ),
    (
        "a chunked body past the limit",
        "POST",
        "/translate",
        {"content": (b"[" + b'"dog",' * 10_000 for _ in range(8)), "headers": JSON},
        413,
        "too large",
    ),
    (
        "two file parts",
        "POST",
        "/translate_file",
        {
            "files": [("file", ("a.txt", b"dog")), ("file", ("b.txt", b"cat"))],
            "data": {"source": "en", "target": "de"},
        },
        400,
        "send one file, got 2",
    ),
    (
        "a file cut inside a character",
        "POST",
        "/translate_file",
        {
            "files": {"file": ("a.txt", "\U0001f600".encode() * 5_001)},
            "data": {"source": "en", "target": "de"},
        },
        400,
        "the file exceeds text limit",
    ),
    ("HEAD /health", "HEAD", "/health", {}, 200, ""),
    ("HEAD /languages", "HEAD", "/languages", {}, 200, ""),
]


@pytest.mark.parametrize(
    ("kind", "length"),
    [("application/json", 150_000_000), ("multipart/form-data; boundary=x", 150_000_000)],
)
def test_a_body_too_large_is_refused_before_it_is_read(translator_server, kind, length):
    """Only the headers are sent: the answer comes from the Content-Length alone."""
    host, port = translator_server.url.removeprefix("http://").split(":")
    head = (
        f"POST /translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(head.encode())
        answer = b""
        while chunk := connection.recv(65536):  # the server closes the connection after it
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413"), answer
    assert "too large" in answer and f"{length:,}" in answer, answer


def _ask(**fields) -> dict:
    """A completion request for the served model (named by its directory, ``best``)."""
    return {"json": {"model": "best", **fields}}


def _ask_raw(fields: str) -> dict:
    return _raw('{"model": "best", ' + fields + "}")


OPENAI_CASES = [
    ("seed 2**70", "POST", "/v1/completions", _ask(prompt="to be", seed=2**70), 400,
     "seed must be a whole number from 0 to"),
    ("seed -1", "POST", "/v1/completions", _ask(prompt="to be", seed=-1), 400, "seed"),
    ("seed 1.5", "POST", "/v1/completions", _ask(prompt="to be", seed=1.5), 400, "whole number"),
    ("max_tokens 2.5", "POST", "/v1/completions", _ask(prompt="to", max_tokens=2.5), 400,
     "max_tokens"),
    ("max_tokens Infinity", "POST", "/v1/completions",
     _ask_raw('"prompt": "to", "max_tokens": Infinity'), 400, "max_tokens"),
    ("temperature NaN", "POST", "/v1/completions", _ask_raw('"prompt": "to", "temperature": NaN'),
     400, "temperature"),
    ("top_p Infinity", "POST", "/v1/completions", _ask_raw('"prompt": "to", "top_p": Infinity'),
     400, "top_p"),
    ("stream 'maybe'", "POST", "/v1/completions", _ask(prompt="to", stream="maybe"), 400,
     "stream must be true or false"),
    ("prompt with a lone surrogate", "POST", "/v1/completions", _ask_raw('"prompt": "\\udc80"'),
     400, "lone surrogate"),
    ("chat message with a lone surrogate", "POST", "/v1/chat/completions",
     _ask_raw('"messages": [{"role": "user", "content": "\\ud800"}]'), 400, "lone surrogate"),
    ("prompt a list of numbers", "POST", "/v1/completions", _ask(prompt=[1, 2]), 400, "prompt"),
    ("n 2", "POST", "/v1/completions", _ask(prompt="to", n=2), 400, "n: only 1"),
    ("JSON 30,000 deep", "POST", "/v1/completions",
     _ask_raw('"prompt": ' + "[" * 30_000 + "]" * 30_000), 400, "nested deeper"),
    ("stream 'false', a string", "POST", "/v1/completions",
     _ask(prompt="to be", max_tokens=3, stream="false"), 400, "stream must be true or false"),
    ("stream 'yes' in a chat", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}], stream="yes"), 400,
     "stream must be true or false"),
    ("temperature '0.5', a string", "POST", "/v1/completions",
     _ask(prompt="to", temperature="0.5"), 400, "temperature must be a number"),
    ("max_tokens '3', a string", "POST", "/v1/completions", _ask(prompt="to", max_tokens="3"),
     400, "max_tokens must be a whole number"),
    ("seed '1', a string", "POST", "/v1/completions", _ask(prompt="to", seed="1"), 400,
     "seed must be a whole number"),
    ("include_usage 'true', a string", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}], stream=True,
          stream_options={"include_usage": "true"}), 400, "include_usage must be true or false"),
    ("chat part with text null", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": [{"type": "text", "text": None}]}]), 400,
     "text is a string"),
    ("chat part without text", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": [{"type": "text"}]}]), 400, "text is a string"),
    ("chat top_logprobs without logprobs", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}], top_logprobs=3), 400,
     "top_logprobs is not supported"),
    ("chat message over --char-limit", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to be " * 1600}]), 400, "more than the limit"),
    ("stop with 5,000 sequences", "POST", "/v1/completions",
     _ask(prompt="to", stop=[f"x{i}" for i in range(5000)]), 400, "at most 4 sequences"),
    ("presence_penalty 1", "POST", "/v1/completions", _ask(prompt="to", presence_penalty=1), 400,
     "presence_penalty is not supported"),
    ("logit_bias in a chat", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}], logit_bias={"1": 5}), 400,
     "logit_bias is not supported"),
    ("chat of 2,000 messages", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}] * 2000), 400, "more than the limit"),
    ("a glossary for a language model", "POST", "/v1/completions",
     _ask(prompt="to", glossary={"to": "zu"}), 400,
     "glossary applies to translation models"),
    ("min_confidence in a chat", "POST", "/v1/chat/completions",
     _ask(messages=[{"role": "user", "content": "to"}], min_confidence=2), 400,
     "min_confidence applies to translation models"),
    ("protect for a language model", "POST", "/v1/completions", _ask(prompt="to", protect="("),
     400, "protect applies to translation models"),
    ("models.retrieve of another name", "GET", "/v1/models/gpt-4", {}, 404, "does not exist"),
    ("HEAD /v1/models", "HEAD", "/v1/models", {}, 200, ""),
]  # fmt: skip


def _check(url: str, method: str, path: str, kwargs: dict, status: int, words: str) -> None:
    response = httpx.request(method, url + path, timeout=60, **kwargs)
    assert response.status_code == status, response.text[:300]
    assert "Traceback" not in response.text and words in response.text, response.text[:300]
    if method == "HEAD":
        assert response.content == b""


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "words"),
    [c[1:] for c in LIBRETRANSLATE_CASES],
    ids=[c[0] for c in LIBRETRANSLATE_CASES],
)
def test_libretranslate_routes_answer_hostile_requests_clearly(
    translator_server, method, path, kwargs, status, words
):
    _check(translator_server.url, method, path, kwargs, status, words)


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "words"),
    [c[1:] for c in OPENAI_CASES],
    ids=[c[0] for c in OPENAI_CASES],
)
def test_openai_routes_answer_hostile_requests_clearly(
    lm_server, method, path, kwargs, status, words
):
    _check(lm_server.url, method, path, kwargs, status, words)


def test_the_language_model_server_survives_its_clients(lm_server, lm_dir):
    """After every hostile case: the model is retrieved by name, a stream's chunks share one
    id, completions still come, and no worker died."""
    name = Path(lm_dir).resolve().name
    assert httpx.get(lm_server.url + f"/v1/models/{name}").json()["id"] == name
    body = {"model": name, "prompt": "to be", "max_tokens": 6, "stream": True, "temperature": 0}
    with httpx.stream("POST", lm_server.url + "/v1/completions", json=body, timeout=60) as r:
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    ids = {json.loads(e)["id"] for e in events[:-1]}
    assert len(events) > 2 and len(ids) == 1
    for seed in (0, 2**64 - 1):
        done = httpx.post(
            lm_server.url + "/v1/completions",
            json={"model": name, "prompt": "to be", "max_tokens": 3, "seed": seed},
            timeout=60,
        )
        assert done.status_code == 200, done.text
    health = httpx.get(lm_server.url + "/health").json()
    assert health["workers"] == 1 and health["workers_restarted"] == 0
    assert set(HEALTH) <= set(health) and health["requests"] >= 2


def _cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of ``pids`` (those still running), in seconds."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow  # its own server, and the time limit to wait out twice
def test_abandoned_completions_stop_at_the_timeout_and_sigterm_ends_the_server(lm_dir):
    """400 prompts x 200 tokens, abandoned by a client that stops waiting: the generating
    process stops once the server's --timeout is spent (its CPU time stops growing); a
    stream under way when SIGTERM comes ends by the same limit, and the server with it."""
    server = PortZeroServer(lm_dir, "--workers", "1", "--timeout", "3")
    try:
        generators = [
            p
            for p in children(server.proc.pid)
            if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        assert generators  # completions are generated in a process of their own
        body = {"model": "best", "prompt": ["to be"] * 400, "max_tokens": 200}
        with pytest.raises(httpx.TimeoutException):
            httpx.post(server.url + "/v1/completions", json=body, timeout=1)
        time.sleep(4)  # past the server's time limit
        spent = _cpu_seconds(generators)
        time.sleep(2)
        assert _cpu_seconds(generators) - spent < 0.3  # idle: the work stopped
        answer = httpx.post(server.url + "/v1/completions", json=body, timeout=30)
        assert answer.status_code == 503 and "Timed out" in answer.text, answer.text[:200]
        stream = {**body, "prompt": "to be", "max_tokens": 2048, "stream": True}
        with httpx.stream("POST", server.url + "/v1/completions", json=stream, timeout=30) as r:
            lines = r.iter_lines()
            next(lines)
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            server.proc.wait(timeout=30)
        assert time.monotonic() - started < 15
        assert server.proc.returncode in (0, -signal.SIGTERM)
        left = time.monotonic() + 10
        while time.monotonic() < left and any(_alive(p) for p in generators):
            time.sleep(0.1)
        running = [Path(f"/proc/{p}/cmdline").read_bytes() for p in generators if _alive(p)]
        assert running == []
    finally:
        server.stop()


def test_a_killed_generating_process_is_a_503_and_is_replaced(lm_server):
    """SIGKILL the generating process in the middle of a completion: that request gets a
    clean 503 to retry, the next is answered by a new process, and /health counts it."""
    body = {"model": "best", "prompt": "to be", "max_tokens": 2048, "temperature": 1.0}
    [generator] = [
        p
        for p in children(lm_server.proc.pid)
        if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, lm_server.url + "/v1/completions", json=body, timeout=60)
        time.sleep(0.5)
        os.kill(generator, signal.SIGKILL)
        answer = pending.result()
    # 200: it ended before the kill; 503: retry (or timed out, on a machine so loaded that
    # the new process took longer than --timeout to load)
    assert answer.status_code in (200, 503) and "Traceback" not in answer.text, answer.text
    deadline = time.monotonic() + 120
    while True:  # answered by the new process once it has loaded
        again = httpx.post(
            lm_server.url + "/v1/completions", json={**body, "max_tokens": 3}, timeout=60
        )
        if again.status_code == 200 or time.monotonic() > deadline:
            break
        assert again.status_code == 503, again.text[:200]
    assert again.status_code == 200, again.text[:200]
    assert httpx.get(lm_server.url + "/health").json()["processes_restarted"] == 1


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, in MiB."""
    total = 0
    for p in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _handles(pid: int) -> tuple[int, int]:
    """Threads and open files of ``pid`` and its children."""
    threads = files = 0
    for p in [pid, *children(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            threads += int(re.search(r"Threads:\s+(\d+)", status).group(1))
            files += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
    return threads, files


CHAT = {"model": "best", "max_tokens": 8, "temperature": 0}
SAY = [{"role": "user", "content": "to be"}]
TO_DE = {"source": "en", "target": "de"}
HOSTILE = {  # per endpoint: requests that must each get a 4xx with a JSON error
    "/translate": [
        _raw('{"q": "\\ud800 dog", "source": "en", "target": "de"}'),
        _raw('{"q": "dog", "target": "de", "alternatives": Infinity}'),
        _raw('{"q": ' + "[" * 5000 + "]" * 5000 + "}"),
        {"json": {**GOOD, "api_key": ["x"]}},
        {"json": {"q": "d" * 6000, "target": "de"}},
        {"json": {**GOOD, "q": "<b>" * 1600 + "the dog " * 25, "format": "html"}},
        {"json": {"q": "12345", "source": "auto", "target": "de"}},
        {"content": (b'["dog",' * 20_000 for _ in range(2)), "headers": JSON},
    ],
    "/detect": [_raw('{"q": "\\ud800"}'), {"json": {"q": 7}}, {"json": {"q": "x" * 6000}}],
    "/translate_file": [
        {"files": [("file", ("a.txt", b"dog")), ("file", ("b.txt", b"cat"))], "data": TO_DE},
        {"files": {"file": ("a.txt", "\U0001f600".encode() * 5001)}, "data": TO_DE},
        {"files": {"file": ("a.txt", b"\xff\xfe dog")}, "data": TO_DE},
        {"data": TO_DE},
    ],
    "/v1/chat/completions": [
        {"json": {**CHAT, "messages": [{"role": "user", "content": [{"type": "text"}]}]}},
        {"json": {**CHAT, "messages": SAY * 2000}},
        {"json": {**CHAT, "messages": SAY, "stream": "yes"}},
        {"json": {**CHAT, "messages": SAY, "temperature": "0.5"}},
    ],
}
ENDPOINTS = list(HOSTILE)


def test_32_clients_with_hostile_requests_mixed_in(translator_server, lm_server, en_de):
    """A few seconds of 32 clients (two requests each at least) over /translate, /detect,
    /translate_file and chat completions, one request in four hostile, a decoding process
    killed half-way: every good request gets its answer alone (or, for the batch the killed
    process held, a clean 503 to retry), every hostile one its 4xx, and memory, threads and
    open files stay bounded."""
    url, lm = translator_server.url, lm_server.url
    expected = dict(zip(SENTENCES, expected_translations(en_de, SENTENCES), strict=True))
    chat_answer = httpx.post(lm + "/v1/chat/completions", json={**CHAT, "messages": SAY})
    reply = chat_answer.json()["choices"][0]["message"]["content"]
    servers = [translator_server.proc.pid, lm_server.proc.pid]
    before = [_rss_mb(pid) for pid in servers]
    handles = [_handles(pid) for pid in servers]
    stop = time.monotonic() + 4.0
    outcomes: dict[str, int] = {"good": 0, "hostile": 0, "retry": 0}
    wrong: list[str] = []
    lock = threading.Lock()

    def good(http: httpx.Client, endpoint: str, text: str) -> tuple[bool, httpx.Response]:
        if endpoint == "/detect":
            r = http.post(url + endpoint, json={"q": text})
            return r.status_code == 200 and r.json()[0]["language"] == "en", r
        if endpoint == "/v1/chat/completions":
            r = http.post(lm + endpoint, json={**CHAT, "messages": SAY})
            return r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == reply, r
        if endpoint == "/translate_file":
            files = {"file": ("notes.txt", f"{text}\n".encode())}
            r = http.post(url + endpoint, files=files, data=TO_DE)
            if r.status_code != 200:
                return False, r
            back = http.get(r.json()["translatedFileUrl"])
            return back.text == f"{expected[text]}\n", back
        r = http.post(url + endpoint, json={**GOOD, "q": text})
        return r.status_code == 200 and r.json()["translatedText"] == expected[text], r

    def client(number: int) -> None:
        with httpx.Client(timeout=180) as http:
            i = 0
            while i < 2 or time.monotonic() < stop:  # one hostile and one good at least
                i += 1
                endpoint = ENDPOINTS[(number + i) % len(ENDPOINTS)]
                if i % 4 == 1:
                    cases = HOSTILE[endpoint]
                    base = lm if endpoint.startswith("/v1") else url
                    r = http.post(base + endpoint, **cases[(number + i) % len(cases)])
                    ok, kind = 400 <= r.status_code < 500 and "error" in r.json(), "hostile"
                else:
                    ok, r = good(http, endpoint, SENTENCES[(number + i) % len(SENTENCES)])
                    kind = "good"
                    if r.status_code == 503 and "retry" in r.text:
                        ok, kind = True, "retry"
                with lock:
                    outcomes[kind] += 1
                    if not ok:
                        wrong.append(f"{endpoint} {r.status_code} {r.text[:200]}")

    def kill_one_decoder() -> None:
        time.sleep(2.0)
        decoders = [
            p
            for p in children(translator_server.proc.pid)
            if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        os.kill(decoders[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one_decoder)
    killer.start()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(client, range(32)))
    killer.join()
    assert wrong == []
    assert outcomes["good"] + outcomes["retry"] >= 32 and outcomes["hostile"] >= 32, outcomes
    assert outcomes["retry"] <= 32, outcomes  # at most the batch the killed process held
    r = httpx.post(url + "/translate", json=GOOD, timeout=60)
    assert r.json()["translatedText"] == expected[GOOD["q"]]
    assert httpx.get(url + "/health").json()["processes_restarted"] == 1  # /health says so
    for pid, was, (threads, files) in zip(servers, before, handles, strict=True):
        assert _rss_mb(pid) < was + 400, (was, _rss_mb(pid))
        now_threads, now_files = _handles(pid)
        assert now_files <= files + 8 and now_threads <= threads + 48, (
            (threads, files),
            (now_threads, now_files),
        )


# -- the engines, directly ---------------------------------------------------------------


class _Picky:
    """A decoder that fails any batch holding the text "BAD" (as one bad input would)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def translate(self, texts, options, *, target_token=None, abandoned=None):
        from aiayn.translate.translator import Translation

        self.batches.append(list(texts))
        if texts == ["slow"]:
            time.sleep(0.5)  # the others queue meanwhile, and are taken as one batch
        if "BAD" in texts:
            raise ValueError("cannot decode BAD")
        return [[Translation(t.upper(), 0.0, [])] for t in texts]

    def call(self, task, *args):
        return task(None, *args)

    def close(self) -> None:
        pass


def test_one_bad_request_never_fails_its_batch():
    from aiayn.translate.translator import SearchOptions
    from aiayn.workers.engines import TranslationEngine

    decoder = _Picky()
    engine = TranslationEngine([decoder], max_wait_ms=200.0)

    async def main() -> list:
        jobs = [
            engine.translate([text], SearchOptions(beam=1), timeout=30)
            for text in ("slow", "a", "BAD", "b", "c")
        ]
        return await asyncio.gather(*jobs, return_exceptions=True)

    try:
        results = asyncio.run(main())
    finally:
        engine.close()
    assert [r[0][0].text for r in (results[1], results[3], results[4])] == ["A", "B", "C"]
    assert isinstance(results[2], ValueError)
    together = [b for b in decoder.batches if "BAD" in b and len(b) > 1]
    assert together and ["BAD"] in decoder.batches  # batched together, then decoded apart


class _CountingGenerator:
    """A generator in the test's process: tokens 0, 1, 2, ... until ``on_token`` says stop."""

    eos = None

    def generate(self, request, on_token) -> str:
        for token in range(request.max_new_tokens):
            if not on_token(token):
                return "stopped"
        return "length"

    def close(self) -> None:
        pass


def test_a_dead_generation_worker_is_replaced():
    from aiayn.workers.engines import Generation, LanguageModelEngine
    from aiayn.workers.generator_process import GenerationRequest

    engine = LanguageModelEngine([_CountingGenerator()])
    ended = threading.Event()

    def die(_token: int) -> None:
        raise SystemExit  # not an Exception: what no request handler catches

    def ended_(_error: BaseException | None) -> None:
        ended.set()

    engine.submit(Generation(GenerationRequest([1], 3, 1.0, 1.0, None, 60.0), die, ended_))
    deadline = time.monotonic() + 30
    while engine.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.alive == 0
    tokens: list[int] = []
    request = GenerationRequest([1], 3, 1.0, 1.0, 2**64 - 1, 60.0)
    engine.submit(Generation(request, tokens.append, ended_))
    engine.close()
    assert engine.restarted == 1 and tokens == [0, 1, 2]


def test_a_generation_whose_time_ran_out_in_the_queue_never_starts():
    from aiayn.workers.engines import Generation, LanguageModelEngine
    from aiayn.workers.generator_process import GenerationRequest

    engine = LanguageModelEngine([_CountingGenerator()])
    tokens: list[int] = []
    errors: list[BaseException | None] = []
    late = time.monotonic() - 1
    request = GenerationRequest([1], 3, 1.0, 1.0, None, 60.0)
    engine.submit(Generation(request, tokens.append, errors.append, late))
    engine.close()
    assert tokens == [] and isinstance(errors[0], TimeoutError)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"workers": 0}, "workers"),
        ({"threads": -1}, "threads"),
        ({"queue_size": 0}, "queue_size"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"char_limit": "5000"}, "char_limit"),
        ({"decode": {"beam": 5}}, "decode"),
        ({"workers": True}, "workers"),
    ],
)
def test_settings_refuse_what_no_server_could_answer(change, words):
    from aiayn.errors import AiaynError
    from aiayn.serve.settings import ServeSettings

    with pytest.raises(AiaynError, match=words):
        ServeSettings(models=("m",), **change)


def test_api_key_files_ignore_indented_comments(tmp_path):
    from aiayn.errors import AiaynError
    from aiayn.serve.settings import read_api_keys

    (tmp_path / "keys").write_text("   # a comment\n\tsecret\n  #another\n")
    assert read_api_keys(tmp_path / "keys") == frozenset({"secret"})
    (tmp_path / "none").write_text("   # only a comment\n")
    with pytest.raises(AiaynError, match="no API key"):
        read_api_keys(tmp_path / "none")


class _Endless:
    """A decoder whose first batch never ends unless it is abandoned."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def translate(self, texts, options, *, target_token=None, abandoned=None):
        from aiayn.translate.translator import Translation
        from aiayn.workers.translator_process import RequestAbandoned

        while texts == ["endless"]:
            if abandoned is not None and abandoned():
                self.stopped.set()
                raise RequestAbandoned("nobody waits")
            time.sleep(0.05)
        return [[Translation(t.upper(), 0.0, [])] for t in texts]

    def call(self, task, *args):
        return task(None, *args)

    def close(self) -> None:
        pass


def test_a_timed_out_request_frees_its_decoder():
    from aiayn.translate.translator import SearchOptions
    from aiayn.workers.engines import TranslationEngine

    decoder = _Endless()
    engine = TranslationEngine([decoder], max_wait_ms=0.0)

    async def main():
        with pytest.raises(TimeoutError):
            await engine.translate(["endless"], SearchOptions(beam=1), timeout=0.3)
        return await engine.translate(["next"], SearchOptions(beam=1), timeout=10)

    try:
        answer = asyncio.run(main())
    finally:
        engine.close()
    assert decoder.stopped.is_set() and answer[0][0].text == "NEXT"
