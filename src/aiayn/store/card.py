"""Model cards: the ``README.md`` of every model directory, for a person who finds it.

A card says what the model is (architecture and size, read from the model itself), what it
was trained on (data files with their SHA-256 sums), how (the command and the config), how
well it scores (with sacreBLEU signatures), under which licence, and what it cannot do.
``save_model`` writes one into every model directory, from a ``ModelCard`` its caller fills
with what it knows; what nobody knows is said to be unknown, never left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiayn.config import ModelConfig, TrainConfig
from aiayn.config_io import config_to_dict
from aiayn.data.tokenizer_files import TokenizerInfo

CARD_FILE = "README.md"
MANIFEST = "manifest.json"  # a prepared dataset's


@dataclass(frozen=True)
class DataFile:
    """A text file a model was trained (or validated) on."""

    role: str  # e.g. "train (en)"
    path: str
    sha256: str
    sentences: int = 0  # 0: not recorded
    pieces: int = 0  # the subword pieces those sentences were cut into


@dataclass(frozen=True)
class Score:
    """One score of the model on a split; ``signature`` says how it was computed."""

    split: str
    metric: str  # e.g. "BLEU", "BLEU (greedy)", "perplexity"
    value: float
    signature: str = ""  # sacreBLEU's, for BLEU and chrF
    note: str = ""  # e.g. "update 1200, during training"


@dataclass(frozen=True, kw_only=True)
class ModelCard:
    """What a model directory says about itself beyond its config (every field optional)."""

    origin: str = ""  # how the model was made, in a sentence
    domain: str = ""  # what kind of text the training data is ("" : not recorded)
    command: str = ""  # the command that made it
    config: dict[str, Any] | None = None  # the training config (or recipe), as a dict
    started_from: str = ""  # the model directory it was fine-tuned from
    teacher: str = ""  # the model directory whose translations it was trained on (a student)
    teacher_scores: tuple[Score, ...] = ()  # the teacher's test scores, from its own card
    data: tuple[DataFile, ...] = ()
    scores: tuple[Score, ...] = ()
    license: str = ""  # "" : not stated
    limits: tuple[str, ...] = ()  # beyond those read from the model and its tokenizers
    signatures: dict[str, str] = field(default_factory=dict)  # metric -> sacreBLEU's, for
    # the scores a trainer records (validation BLEU and chrF)
    notes: dict[str, str] = field(default_factory=dict)  # further facts, name -> value


def trained_card(
    card: ModelCard,
    cfg: TrainConfig,
    updates: int,
    tokens: int,
    criterion: str,
    scores: Mapping[str, float],
) -> ModelCard:
    """``card`` (what the trainer's caller knows) completed for the best model of a training
    run after ``updates`` updates: its origin, config, data and validation ``scores`` (by the
    names of ``metrics.jsonl``: nll, ppl, bleu, chrf), each BLEU and chrF with the signature
    ``card.signatures`` gives; ``criterion`` chose it."""
    split, note = cfg.data.valid_split, f"update {updates}, during training"
    shown = [Score(split, "loss (nll)", scores["nll"], note=note)]
    shown.append(Score(split, "perplexity", scores["ppl"], note=note))
    search = "greedy" if cfg.run.valid_beam == 1 else f"beam {cfg.run.valid_beam}"
    for metric, name in (("bleu", "BLEU"), ("chrf", "chrF")):
        if metric in scores:
            signature = card.signatures.get(metric, "")
            shown.append(Score(split, f"{name} ({search})", scores[metric], signature, note))
    started = f", starting from {cfg.run.init_from}" if cfg.run.init_from else ""
    return replace(
        card,
        origin=card.origin
        or f"Trained by aiayn for {updates:,} updates ({tokens:,} target tokens{started}); "
        f"the checkpoint with the best validation {criterion}.",
        config=config_to_dict(cfg),
        started_from=cfg.run.init_from,
        data=dataset_files(cfg.data.dir),
        scores=tuple(shown),
    )


def dataset_files(directory: str | Path) -> tuple[DataFile, ...]:
    """The text files a dataset from ``aiayn prepare`` was made from, with their checksums
    (nothing when ``directory`` holds no readable manifest)."""
    try:
        manifest = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return ()
    if not isinstance(manifest, dict):
        return ()
    langs = {"src": manifest.get("src_lang", "src"), "tgt": manifest.get("tgt_lang", "tgt")}
    files = []
    for split, stats in manifest.get("splits", {}).items():
        for side in ("src", "tgt"):
            path, digest = stats.get("files", {}).get(side), stats.get("text_sha256", {})
            if path:
                role, sha = f"{split} ({langs[side]})", digest.get(side, "")
                size = (_count(stats, "pairs"), _count(stats, f"{side}_tokens"))
                files.append(DataFile(role, path, sha, *size))
    if "source" in manifest:  # a language-model corpus: one text file
        files.append(DataFile("text", manifest["source"], ""))
    return tuple(files)


def _count(stats: dict, name: str) -> int:
    value = stats.get(name, 0)
    return value if isinstance(value, int) and value > 0 else 0


def render_card(
    card: ModelCard, cfg: ModelConfig, *, parameters: int, tokenizer: TokenizerInfo | None
) -> str:
    """The Markdown of a model directory's ``README.md``."""
    sections = [
        _title(cfg, tokenizer),
        card.origin or "How this model was made is not recorded.",
        _model_section(cfg, parameters, tokenizer),
        _use_section(cfg),
        _data_section(card),
        *([_teacher_section(card)] if card.teacher else []),
        _training_section(card),
        _scores_section(card),
        "## Licence\n\n"
        + (
            card.license
            or "Not stated. The licences of the training data (and of a model it was "
            "fine-tuned from) apply; state one here before sharing the model."
        ),
        "## Known limits\n\n" + "\n".join(f"- {x}" for x in _limits(card, cfg, tokenizer)),
    ]
    return "\n\n".join(sections) + "\n"


def _title(cfg: ModelConfig, tokenizer: TokenizerInfo | None) -> str:
    if not cfg.is_encoder_decoder:
        return "# Language model (aiayn)"
    src, tgt = (tokenizer.src_lang, tokenizer.tgt_lang) if tokenizer else ("", "")
    pair = f"{src or '?'} → {tgt or '?'} " if src or tgt else ""
    return f"# {pair}translation model (aiayn)"


def _model_section(cfg: ModelConfig, parameters: int, tokenizer: TokenizerInfo | None) -> str:
    kind = (
        f"encoder–decoder Transformer, {cfg.n_encoder_layers} + {cfg.n_decoder_layers} layers"
        if cfg.is_encoder_decoder
        else f"decoder-only Transformer, {cfg.n_decoder_layers} layers"
    )
    rows = [
        ("architecture", f"{kind} (Vaswani et al., 2017)"),
        ("d_model / heads / d_ff", f"{cfg.d_model} / {cfg.n_heads} / {cfg.d_ff}"),
        ("parameters", f"{parameters:,}"),
        ("normalisation", "pre-norm" if cfg.norm_first else "post-norm, as the paper"),
        ("activation / positions", f"{cfg.activation} / {cfg.positional}"),
        ("vocabulary", _vocabulary(cfg, tokenizer)),
        ("files", "config.json (architecture), model.safetensors (weights), tokenizer files"),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"## Model\n\n| | |\n|---|---|\n{table}"


def _vocabulary(cfg: ModelConfig, tokenizer: TokenizerInfo | None) -> str:
    sizes = f"{cfg.src_vocab_size:,} / {cfg.tgt_vocab_size:,} ids (source / target)"
    if cfg.src_vocab_size == cfg.tgt_vocab_size or not cfg.is_encoder_decoder:
        sizes = f"{cfg.tgt_vocab_size:,} ids"
    if tokenizer is None:
        return sizes
    shared = "joint " if tokenizer.src_file == tokenizer.tgt_file else ""
    return f"{shared}{tokenizer.kind} ({', '.join(tokenizer.files)}), {sizes}"


def _use_section(cfg: ModelConfig) -> str:
    if not cfg.is_encoder_decoder:
        command = 'aiayn generate --model MODEL_DIR --prompt "To be"'
    else:
        command = "aiayn translate --model MODEL_DIR -i input.txt  # one sentence a line"
    return f"## Use\n\n```\n{command}\n```"


def _data_section(card: ModelCard) -> str:
    domain = f"Domain: {card.domain}" if card.domain else "Domain: not recorded."
    if not card.data:
        return f"## Data\n\n{domain}\n\nFiles: not recorded."
    rows = "\n".join(
        f"| {d.role} | `{d.path}` | {_size(d.sentences)} | {_size(d.pieces)} | "
        f"`{d.sha256 or '?'}` |"
        for d in card.data
    )
    head = "| split | file | sentences | pieces | SHA-256 |\n|---|---|---:|---:|---|"
    return f"## Data\n\n{domain}\n\n{head}\n{rows}"


def _teacher_section(card: ModelCard) -> str:
    bleu = [f"{s.split} {s.value:.2f}" for s in card.teacher_scores if s.metric == "BLEU"]
    scores = (
        f"The teacher's test BLEU (from its model card): {', '.join(bleu)}."
        if bleu
        else "The teacher's test BLEU is not on its model card."
    )
    return (
        f"## Teacher\n\nA student of the model in `{card.teacher}`: trained on the teacher's "
        "distilled translations (sequence-level knowledge distillation, Kim & Rush 2016): the "
        "teacher translated the training corpus's source side with beam search, and this "
        f"model learned those translations in place of the references.\n\n{scores}"
    )


def read_scores(directory: str | Path) -> tuple[Score, ...]:
    """The scores on the model card of the model directory ``directory`` (its Scores table,
    as ``render_card`` writes it); none where it has no card or no scores."""
    try:
        text = (Path(directory) / CARD_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    _, found, rest = text.partition("\n## Scores\n")
    table = rest.split("\n## ", 1)[0] if found else ""
    scores = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|", 4)]  # signatures hold |
        if len(cells) != 5:
            continue
        split, metric, value, note, signature = cells
        try:
            number = float(value)
        except ValueError:
            continue  # the header and its rule
        signature = signature.strip("`")
        scores.append(Score(split, metric, number, "" if signature == "-" else signature, note))
    return tuple(scores)


def _size(n: int) -> str:
    return f"{n:,}" if n else "?"


def _training_section(card: ModelCard) -> str:
    lines = ["## Training", ""]
    if card.started_from:
        lines.append(f"Fine-tuned from the model in `{card.started_from}`.\n")
    lines.append(f"Command: `{card.command}`" if card.command else "Command: not recorded.")
    for name, value in card.notes.items():
        lines.append(f"\n{name}: {value}")
    if card.config is not None:
        text = json.dumps(card.config, indent=2, ensure_ascii=False)
        lines += ["", "Config:", "", "```json", text, "```"]
    return "\n".join(lines)


def _scores_section(card: ModelCard) -> str:
    if not card.scores:
        return "## Scores\n\nNone recorded."
    rows = "\n".join(
        f"| {s.split} | {s.metric} | {s.value:.2f} | {s.note} | `{s.signature or '-'}` |"
        for s in card.scores
    )
    head = "| split | metric | score | how | sacreBLEU signature |\n|---|---|---|---|---|"
    return f"## Scores\n\n{head}\n{rows}"


def _limits(card: ModelCard, cfg: ModelConfig, tokenizer: TokenizerInfo | None) -> list[str]:
    limits = []
    if tokenizer is not None and cfg.is_encoder_decoder:
        pair = f"{tokenizer.src_lang or '?'} to {tokenizer.tgt_lang or '?'}"
        limits.append(
            f"Translates {pair} only. A paragraph is cut into sentences, each translated "
            "and joined back in its spacing; HTML (`--format html`) and documents (.docx, "
            ".pptx, .srt, ...) keep their markup; all-caps sentences are translated in the "
            "case the model knows and given back in capitals."
        )
        if tokenizer.pretokenized:
            limits.append(
                "Expects tokenised text (as its training data, e.g. Moses-tokenised and "
                "lowercased) and writes tokenised text; raw text loses quality."
            )
        else:
            limits.append("Expects raw text and writes detokenised text.")
    if cfg.positional == "learned":
        limits.append(f"Reads at most {cfg.max_positions} tokens (its learned positions).")
    limits.append(
        "Knows only the vocabulary and domain of its training data; words outside them come "
        "out as pieces or `<unk>`. Not for text unlike that data"
        + (f" ({card.domain})" if card.domain else "")
        + ": elsewhere it can translate fluently and wrongly. Each translation's confidence "
        "(`aiayn translate --scores`, the server's `confidence`) says which to check, and "
        "`--min-confidence` gives back the source of those below it."
    )
    return limits + list(card.limits)
