"""``ServeSettings``: the one declaration of a server's settings, as ``SearchOptions`` is of
the decoding settings. Each field is declared with ``option(default, help, rule)``; from it
``aiayn serve`` generates ``--field-name`` with its default and help
(``aiayn.cli.common.add_fields``), and ``__post_init__`` checks it by its rule. Adding a
setting is one field and its help (plus its use); ``tests/serve/test_settings.py`` finds
every field on the command line.

Imports neither torch nor FastAPI, so ``aiayn serve --help`` reads it without them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.checks import Maybe, Number, OneOf, Text, Whole, check
from aiayn.errors import AiaynError, ConfigError
from aiayn.search_options import SearchOptions, Texts, option, rules

SERVE = ("serve",)
PROFILE_NAMES = ("fast", "reference")  # aiayn.accel.PROFILES' names (tests/serve checks)


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line (blank lines and ``#`` comments ignored).

    Raises:
        AiaynError: the file cannot be read or holds no key.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise AiaynError(f"{path}: cannot read the API keys ({e})") from None
    keys = frozenset(
        line.strip() for line in lines if line.strip() and not line.strip().startswith("#")
    )
    if not keys:
        raise AiaynError(f"{path}: no API key in the file")
    return keys


@dataclass(frozen=True)
class Keys:
    """None (no key needed), or a non-empty set of keys; on the command line, a file of them
    (``read_api_keys``)."""

    def problem(self, value: object) -> str | None:
        if value is None or (isinstance(value, frozenset) and value):
            return None
        return f"must be None or a non-empty frozenset of keys, got {value!r}"

    def parse(self, text: str) -> str:
        return text  # a file, read by the field's ``read``


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """What ``aiayn serve`` (``aiayn.serve.app.create_app``) serves and its bounds."""

    models: tuple[str, ...] = option(
        (),
        "model directory; repeat it for several translation models (one per language pair)",
        Texts(),
        commands=SERVE,
        flag="--model",
        metavar="DIR",
    )
    # how translations are decoded; a request may change the fields that name a request
    # parameter (aiayn.serve.libretranslate_requests.requested_options): the commands'
    # options of SearchOptions
    decode: SearchOptions = field(default_factory=SearchOptions)
    device: str = option("cpu", "cpu, cuda, cuda:N or mps", Text(), commands=SERVE)
    profile: str | None = option(
        None,
        "implementation profile, a name in aiayn.accel.PROFILES: the measured speed tricks "
        "(fast, the default) or the paper's plain modules (reference)",
        Maybe(OneOf(PROFILE_NAMES)),
        commands=SERVE,
    )
    workers: int | None = option(
        None,
        "batches decoded side by side, per model (processes); none: one per CPU core, 1 on a GPU",
        Maybe(Whole(1, 256)),
        commands=SERVE,
    )
    threads: int = option(
        1,
        "threads per worker (1 on the CPU, where small batches use one core best; see "
        "aiayn.workers.engines)",
        Whole(1, 1024),
        commands=SERVE,
    )
    max_wait_ms: float = option(
        25.0,
        "how long a batch smaller than the worker's last may wait for more requests",
        Number(0.0, 10_000.0),
        commands=SERVE,
    )
    queue_size: int = option(
        256, "requests waiting at most (more get 429)", Whole(1), commands=SERVE
    )
    timeout: float = option(
        60.0,
        "seconds a request may take, waiting included (more gets 503)",
        Number(0.001),
        commands=SERVE,
    )
    char_limit: int = option(
        5000, "characters per request (more gets 400)", Whole(1), commands=SERVE
    )
    max_file_mb: float = option(
        20.0,
        "/translate_file: a document's size in MiB at most (more gets 413; 20 is the upload limit)",
        Number(0.0, 20.0, above=True),
        commands=SERVE,
    )
    max_file_parts: int = option(
        1_000,
        "/translate_file: slides, e-book chapters or subtitle cues at most (more gets 413)",
        Whole(1),
        commands=SERVE,
    )
    max_file_texts: int = option(
        20_000,
        "/translate_file: paragraphs, cells and cues to translate at most (more gets 413)",
        Whole(1),
        commands=SERVE,
    )
    file_expiry: float = option(
        3600.0,
        "how long a translated file waits at /download_file, in seconds (kept in the "
        "server's own temporary folder, deleted when it expires or the server stops)",
        Number(0.0, above=True),
        commands=SERVE,
        metavar="SECONDS",
    )
    max_alternatives: int = option(
        4, "alternatives a translation request may ask for at most", Whole(0), commands=SERVE
    )
    max_tokens_limit: int = option(
        2048, "completions: the most tokens one request may ask for", Whole(0), commands=SERVE
    )
    api_keys: frozenset[str] | None = option(
        None,
        "accept only these keys: a file of them, one a line",
        Keys(),
        commands=SERVE,
        metavar="FILE",
        read=read_api_keys,
    )
    suggestions: str | None = option(
        None,
        "accept /suggest, appending each suggestion to FILE (one JSON object a line)",
        Maybe(Text()),
        commands=SERVE,
        metavar="FILE",
    )
    cors: tuple[str, ...] = option(
        ("*",),
        "origins browsers may call from (* : any)",
        Texts(),
        commands=SERVE,
        metavar="ORIGIN",
        nargs="*",
    )

    def __post_init__(self) -> None:
        """Refuse settings no server could answer with (the command line's options are
        checked by the same rules).

        Raises:
            ConfigError: naming the field and what it must be.
        """
        from aiayn.text.protect import pattern_problem

        if not isinstance(self.decode, SearchOptions):
            raise ConfigError(f"ServeSettings.decode must be a SearchOptions, got {self.decode!r}")
        if not self.models:
            raise ConfigError("ServeSettings.models must name at least one model directory")
        check(self, rules(ServeSettings), ConfigError, "ServeSettings.")
        if problem := pattern_problem(self.decode.protect_patterns):
            raise ConfigError(f"ServeSettings.decode: {problem}")

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    def decoders(self, cores: int) -> int:
        """Decoding processes per model: ``workers``, else one per core (1 on a GPU)."""
        if self.workers is not None:
            return self.workers
        return 1 if self.device.startswith("cuda") else cores


def setting_fields() -> list[dataclasses.Field]:
    """The fields ``aiayn serve`` offers as options."""
    return [f for f in dataclasses.fields(ServeSettings) if "rule" in f.metadata]
