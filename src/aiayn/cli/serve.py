"""``aiayn serve``: a model behind the HTTP APIs existing clients speak (needs the ``serve``
extra: ``pip install aiayn[serve]``)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import time

from aiayn.cli.common import (
    UsageError,
    add_search_options,
    integer,
    log,
    number,
    search_options,
    search_precision,
)


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="serve a model over HTTP (LibreTranslate API, OpenAI completions, a web page)",
    )
    s.add_argument(
        "--model",
        required=True,
        action="append",
        help="model directory; repeat it for several translation models (one per language pair)",
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=integer(minimum=0, maximum=65535), default=5000)
    add_search_options(s, "serve")
    s.add_argument(
        "--max-wait-ms",
        type=number(minimum=0.0, maximum=10_000.0),
        default=25.0,
        help="how long a batch smaller than the worker's last may wait for more requests",
    )
    s.add_argument(
        "--queue-size",
        type=integer(minimum=1),
        default=256,
        help="requests waiting at most (more get 429)",
    )
    s.add_argument(
        "--timeout",
        type=number(minimum=0.001),
        default=60.0,
        help="seconds a request may take, waiting included (more gets 503)",
    )
    s.add_argument(
        "--char-limit",
        type=integer(minimum=1),
        default=5000,
        help="characters per request (more gets 400)",
    )
    _add_file_options(s)
    s.add_argument("--api-keys", metavar="FILE", help="accept only these keys (one a line)")
    s.add_argument(
        "--suggestions",
        metavar="FILE",
        help="accept /suggest, appending each suggestion to FILE (one JSON object a line)",
    )
    s.add_argument(
        "--cors",
        nargs="*",
        default=["*"],
        metavar="ORIGIN",
        help="origins browsers may call from (default: any)",
    )
    s.add_argument(
        "--workers",
        type=integer(minimum=1, maximum=256),
        help="batches decoded side by side (default: one per CPU core; 1 on a GPU)",
    )
    s.add_argument(
        "--threads",
        type=integer(minimum=1, maximum=1024),
        help="threads per worker (default: 1 on the CPU, where small batches use one core "
        "best; see aiayn.serve.engine)",
    )
    s.set_defaults(handler=run)


def _add_file_options(s: argparse.ArgumentParser) -> None:
    """The bounds of ``/translate_file``'s documents, and how long a translation is kept."""
    s.add_argument(
        "--max-file-mb",
        type=integer(minimum=1, maximum=20),
        default=20,
        help="/translate_file: a document's size in MiB at most (more gets 413; 20 is the "
        "upload limit)",
    )
    s.add_argument(
        "--max-file-parts",
        type=integer(minimum=1),
        default=1000,
        help="/translate_file: slides, e-book chapters or subtitle cues at most (more gets 413)",
    )
    s.add_argument(
        "--max-file-texts",
        type=integer(minimum=1),
        default=20000,
        help="/translate_file: paragraphs, cells and cues to translate at most (more gets 413)",
    )
    s.add_argument(
        "--file-expiry",
        type=number(minimum=1),
        default=3600.0,
        metavar="SECONDS",
        help="how long a translated file waits at /download_file (kept in the server's own "
        "temporary folder, deleted when it expires or the server stops)",
    )


def run(args: argparse.Namespace) -> int:
    for package in ("fastapi", "uvicorn"):
        if importlib.util.find_spec(package) is None:
            raise UsageError(f"{package} is missing: pip install 'aiayn[serve]'")
    import torch
    import uvicorn

    from aiayn.memory import limit_kernel_cache, tune_allocator
    from aiayn.runtime import select_device
    from aiayn.serve.app import create_app
    from aiayn.serve.common import ServeSettings, read_api_keys

    tune_allocator()
    limit_kernel_cache()  # this process and its decoding processes only decode
    device = select_device(args.device)
    cores = len(os.sched_getaffinity(0))
    workers = args.workers or (1 if device.type == "cuda" else cores)
    threads = args.threads or 1
    torch.set_num_threads(threads)
    settings = ServeSettings(
        models=tuple(args.model),
        device=str(device),
        workers=workers,
        threads=threads,
        decode=search_options(args, precision=search_precision(args.precision, device)),
        max_wait_ms=args.max_wait_ms,
        queue_size=args.queue_size,
        timeout=args.timeout,
        char_limit=args.char_limit,
        file_max_bytes=args.max_file_mb * 2**20,
        file_max_parts=args.max_file_parts,
        file_max_texts=args.max_file_texts,
        files_expire_s=args.file_expiry,
        api_keys=read_api_keys(args.api_keys) if args.api_keys else None,
        suggestions=args.suggestions,
        cors_origins=tuple(args.cors),
    )
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]  # the real one, also for --port 0
    log(
        f"loading {len(args.model)} model(s) into {workers} decoding process(es) each "
        f"(a model directory takes seconds to a minute to load and pack)..."
    )
    start = time.perf_counter()
    app = create_app(settings, on_stop=lambda summary: log(f"stopped: {summary}"))
    log(f"loaded in {time.perf_counter() - start:.1f}s")
    log(
        f"serving {', '.join(args.model)} on http://{args.host}:{port}/ ({device}, {workers} "
        f"worker(s) of {threads} thread(s))"
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    with listener:
        server.run(sockets=[listener])
    if not server.started:
        raise UsageError(f"the server on {args.host}:{port} did not start")
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the model loads, so that an address that cannot be
    listened on is a clear error at once (uvicorn's own comes as a log line after the model
    has loaded), and so that ``--port 0`` (a free port) is known and printed.

    Raises:
        UsageError: the host is unknown, or the address is taken or not allowed.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(f"--host {host}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(2048)
    except OSError as e:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    listener.set_inheritable(False)
    return listener
