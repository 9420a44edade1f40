"""``aiayn serve``: a model behind the HTTP APIs existing clients speak (needs the ``serve``
extra: ``pip install aiayn[serve]``)."""

from __future__ import annotations

import argparse
import importlib.util
import socket
import time

from aiayn.cli.common import (
    UsageError,
    add_fields,
    add_search_options,
    field_values,
    integer,
    log,
    options_named,
    search_options,
    search_precision,
)
from aiayn.errors import ConfigError
from aiayn.serve.settings import ServeSettings


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="serve a model over HTTP (LibreTranslate API, OpenAI completions, a web page)",
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=integer(minimum=0, maximum=65535), default=5000)
    add_fields(s, ServeSettings, "serve")  # --model, --workers, ...: ServeSettings' fields
    add_search_options(s, "serve")
    s.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for package in ("fastapi", "uvicorn"):
        if importlib.util.find_spec(package) is None:
            raise UsageError(f"{package} is missing: pip install 'aiayn[serve]'")
    import torch
    import uvicorn

    from aiayn.memory import limit_kernel_cache, tune_allocator
    from aiayn.runtime import select_device
    from aiayn.serve.app import create_app
    from aiayn.serve.service import resolved_settings

    if not args.models:
        raise UsageError("--model: give at least one model directory")
    tune_allocator()
    limit_kernel_cache()  # this process and its decoding processes only decode
    device = select_device(args.device)
    decode = search_options(args, precision=search_precision(args.precision, device))
    try:
        settings = ServeSettings(
            **{**field_values(args, ServeSettings), "device": str(device)}, decode=decode
        )
    except ConfigError as e:
        raise UsageError(options_named(e, ServeSettings)) from None
    settings = resolved_settings(settings)
    workers, threads = settings.workers, settings.threads
    torch.set_num_threads(threads)
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]  # the real one, also for --port 0
    log(
        f"loading {len(args.models)} model(s) into {workers} decoding process(es) each "
        f"(a model directory takes seconds to a minute to load and pack)..."
    )
    start = time.perf_counter()
    app = create_app(settings, on_stop=lambda summary: log(f"stopped: {summary}"))
    log(f"loaded in {time.perf_counter() - start:.1f}s")
    log(
        f"serving {', '.join(args.models)} on http://{args.host}:{port}/ ({device}, {workers} "
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
