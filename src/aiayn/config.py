"""Frozen configuration dataclasses, named as in the paper.

This module imports neither torch nor any aiayn module but ``aiayn.errors``, ``aiayn.checks``
and ``aiayn.search_options``, so every layer
of the package (and tools that only read configs) can depend on it. Reading configs from
dicts and TOML files is ``aiayn.config_io``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from aiayn.checks import check_ranges
from aiayn.search_options import SearchOptions

# Special token ids: the same in every vocabulary aiayn builds (kept here, and only here).
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SPECIAL_PIECES = {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}


@dataclass(frozen=True, kw_only=True)
class SpecialIds:
    """Ids with a role. aiayn's own vocabularies use 0-3; an imported model brings its own
    (Marian: EOS 0, UNK 1, PAD V-1, and decoding starts from PAD)."""

    pad: int = PAD_ID
    unk: int = UNK_ID
    bos: int = BOS_ID  # the decoder's first input
    eos: int = EOS_ID


Activation = Literal["relu", "gelu", "swish"]
# sacreBLEU's BLEU tokenizers that need no download; "" chooses by the target language
# (ko-mecab for Korean, ja-mecab for Japanese, zh for Chinese, else 13a: aiayn.eval).
BleuTokenize = Literal["", "none", "13a", "intl", "char", "zh", "ja-mecab", "ko-mecab"]
Positional = Literal["sinusoidal", "sinusoidal_concat", "learned"]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Hyper-parameters of the encoder–decoder Transformer (§3, Table 3).

    Vocabulary sizes come from the data; presets leave them at 0 until they are known.
    With ``n_encoder_layers == 0`` the model is the decoder-only language model.
    """

    src_vocab_size: int = 0
    tgt_vocab_size: int = 0
    d_model: int = 512  # d_model
    n_heads: int = 8  # h
    d_ff: int = 2048  # d_ff
    n_encoder_layers: int = 6  # N (encoder)
    n_decoder_layers: int = 6  # N (decoder)
    dropout: float = 0.1  # P_drop (§5.4)
    attention_dropout: float = 0.0  # dropout on the attention weights (not in the paper)
    activation_dropout: float = 0.0  # dropout after the FFN activation (not in the paper)
    activation: Activation = "relu"  # §3.3 uses ReLU
    norm_first: bool = False  # the paper is post-norm: LayerNorm(x + Sublayer(x))
    positional: Positional = "sinusoidal"  # §3.5
    max_positions: int = 1024  # longest sequence a learned position table holds
    share_embeddings: bool = True  # one embedding for source and target (§3.4)
    tie_output: bool = True  # pre-softmax projection = target embedding (§3.4)
    bias: bool = True  # biases in linear layers and LayerNorm
    layer_norm_eps: float = 1e-5
    output_bias: bool = False  # a bias on the logits (Marian's final_logits_bias)
    specials: SpecialIds = dataclasses.field(default_factory=SpecialIds)

    def __post_init__(self) -> None:
        check_ranges(
            self,
            at_least_1=("d_model", "n_heads", "d_ff", "n_decoder_layers", "max_positions"),
            at_least_0=("src_vocab_size", "tgt_vocab_size", "n_encoder_layers"),
            above_0=("layer_norm_eps",),
            below_1=("dropout", "attention_dropout", "activation_dropout"),
        )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.tgt_vocab_size and max(vars(self.specials).values()) >= self.tgt_vocab_size:
            raise ValueError(
                f"special ids {self.specials} beyond a vocabulary of {self.tgt_vocab_size}"
            )
        if self.src_vocab_size and self.specials.pad >= self.src_vocab_size:
            raise ValueError(
                f"pad id {self.specials.pad} beyond a vocabulary of {self.src_vocab_size}"
            )
        if self.positional != "learned" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        one_vocab = self.src_vocab_size == self.tgt_vocab_size
        if self.share_embeddings and self.is_encoder_decoder and not one_vocab:
            raise ValueError(
                "share_embeddings needs one vocabulary: "
                f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )

    @property
    def is_encoder_decoder(self) -> bool:
        return self.n_encoder_layers > 0

    @property
    def d_head(self) -> int:
        """d_k = d_v = d_model / h (§3.2.2)."""
        return self.d_model // self.n_heads

    def with_vocab(self, src_vocab_size: int, tgt_vocab_size: int | None = None) -> ModelConfig:
        """Return a copy with vocabulary sizes filled in (target defaults to source)."""
        tgt = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        return dataclasses.replace(self, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt)


# Table 3 sizes, plus the Multi30k Transformer-Tiny of the literature (Wu et al., 2021).
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        d_model=128, n_heads=4, d_ff=256, n_encoder_layers=4, n_decoder_layers=4, dropout=0.3
    ),
    "base": dict(
        d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, dropout=0.1
    ),
    "big": dict(
        d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, dropout=0.3
    ),
    # Students (aiayn.pipeline.distill_stage): the decoder runs once per output token and beam,
    # the encoder once per sentence, so depth moves from the decoder to the encoder.
    # Bergamot's "tiny" En-De student shape (browsermt/students: 6 encoder and 2 decoder
    # layers, d_model 256, FFN 1536, 8 heads), with the paper's decoder layer.
    "student_bergamot": dict(
        d_model=256, n_heads=8, d_ff=1536, n_encoder_layers=6, n_decoder_layers=2, dropout=0.1
    ),
    # A student of "tiny" for small corpora (Multi30k): its width, one decoder layer.
    "student_tiny": dict(
        d_model=128, n_heads=4, d_ff=256, n_encoder_layers=6, n_decoder_layers=1, dropout=0.2
    ),
}


def model_preset(name: str, **overrides: Any) -> ModelConfig:
    """Build a ModelConfig from a named preset (``tiny``, ``base``, ``big``, the students
    ``student_bergamot`` and ``student_tiny``) and overrides."""
    try:
        fields = MODEL_PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(MODEL_PRESETS)}") from None
    return ModelConfig(**{**fields, **overrides})


@dataclass(frozen=True, kw_only=True)
class PrepareConfig:
    """How ``aiayn prepare`` turns a parallel corpus into a binary dataset.

    Splits are file prefixes: ``PREFIX.{src_lang}`` and ``PREFIX.{tgt_lang}``, each plain
    or with ``.gz`` appended.
    """

    src_lang: str
    tgt_lang: str
    train: str
    valid: str
    test: tuple[str, ...] = ()
    vocab_size: int = 10000
    subword_model: Literal["bpe", "unigram"] = "bpe"
    joint_vocab: bool = True  # one vocabulary for both languages, as the paper (§5.1)
    pretokenized: bool = False  # text is already tokenised (Moses): BLEU on tokens
    byte_fallback: bool = False  # unseen characters become bytes instead of <unk>
    # the share of the training text's characters the vocabulary must spell with pieces of
    # their own (SentencePiece); the rarest are left to <unk> or bytes. 1.0 suits alphabets,
    # 0.9995 scripts of thousands of characters (Hangul syllables, Hanja, kanji, hanzi)
    character_coverage: float = 1.0
    max_len: int = 256  # training pairs with a side longer than this (subwords) are dropped
    max_len_ratio: float = 9.0  # ... or whose length ratio exceeds this
    empty_lines: Literal["drop", "error"] = "drop"
    train_limit: int = 0  # use only the first N training pairs (0: all), for quick runs
    vocab_sample: int = 1_000_000  # sentences sampled from the training text for the vocabulary
    shard_size: int = 1_000_000  # pairs per shard of a prepared split
    # With vocab_from, no vocabulary is trained (the fields above are unused): the corpus is
    # encoded with the model's own tokenizers and special ids, so the model can be trained on it.
    vocab_from: str = ""  # a model directory whose tokenizers encode the corpus (fine-tuning)

    def __post_init__(self) -> None:
        if self.vocab_size < 8:
            raise ValueError(f"vocab_size must be at least 8, got {self.vocab_size}")
        check_ranges(
            self, at_least_1=("max_len", "vocab_sample", "shard_size"), at_least_0=("train_limit",)
        )
        if not self.max_len_ratio >= 1:
            raise ValueError(f"max_len_ratio must be at least 1, got {self.max_len_ratio}")
        if not 0 < self.character_coverage <= 1:
            raise ValueError(f"character_coverage must be in (0, 1], got {self.character_coverage}")
        if self.src_lang == self.tgt_lang:
            raise ValueError(f"source and target languages are both {self.src_lang!r}")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """What to train on and how to batch it."""

    dir: str = ""  # a dataset directory written by ``aiayn prepare``
    train_split: str = "train"
    valid_split: str = "valid"
    max_tokens: int = 4096  # padded tokens per batch and side
    max_sentences: int = 0  # cap on sentences per batch (0: none)
    pad_to_multiple: int = 1  # round each batch's width up to a multiple (within max_tokens)
    valid_max_tokens: int = 8192
    block_size: int = 256  # language model: tokens per block
    batch_size: int = 32  # language model: blocks per batch
    valid_batches: int = 0  # language model: random validation batches (0: the whole split)

    def __post_init__(self) -> None:
        check_ranges(
            self,
            at_least_1=(
                "max_tokens",
                "valid_max_tokens",
                "pad_to_multiple",
                "block_size",
                "batch_size",
            ),
            at_least_0=("max_sentences", "valid_batches"),
        )


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """Optimiser and learning-rate schedule (§5.3), and the loss (§5.4)."""

    optimizer: Literal["adam", "adamw"] = "adam"
    betas: tuple[float, float] = (0.9, 0.98)  # β1, β2
    eps: float = 1e-9  # ε
    weight_decay: float = 0.0
    # budget: warm-up, then a decay to min_lr at the end of the run's budget, keyed to its
    # progress max(update / max_updates, training time / max_minutes) (train.schedule.budget_lr)
    schedule: Literal["noam", "inverse_sqrt", "cosine", "constant", "budget"] = "noam"
    budget_decay: Literal["linear", "cosine"] = "linear"  # budget: the decay's shape
    lr: float = 5e-4  # peak learning rate (inverse_sqrt, cosine, constant)
    lr_scale: float = 1.0  # factor on the paper's formula (noam)
    warmup_steps: int = 4000  # warmup_steps
    warmup_init_lr: float = 0.0  # inverse_sqrt / cosine: learning rate at step 0
    min_lr: float = 0.0  # cosine, budget: the floor it decays to
    decay_steps: int = 0  # cosine: steps to reach min_lr (0: run.max_updates)
    label_smoothing: float = 0.1  # ε_ls
    clip_norm: float = 0.0  # gradient-norm clipping (0: off)
    update_freq: int = 1  # batches accumulated into one update

    def __post_init__(self) -> None:
        check_ranges(
            self,
            at_least_1=("update_freq", "warmup_steps"),
            at_least_0=("weight_decay", "warmup_init_lr", "min_lr", "decay_steps", "clip_norm"),
            above_0=("eps", "lr", "lr_scale"),
            below_1=("label_smoothing",),
        )
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {list(self.betas)}")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Where a run lives, how long it goes, how often it reports and saves."""

    dir: str = "runs/default"
    seed: int = 1
    max_updates: int = 100_000
    max_epochs: int = 0  # 0: no limit
    max_minutes: float = 0.0  # wall-clock budget for training (0: no limit)
    log_every: int = 100
    valid_every: int = 1000
    save_every: int = 1000
    keep_last: int = 5  # checkpoints kept (the average needs as many as it averages)
    patience: int = 0  # validations without improvement before stopping (0: never)
    precision: Literal["fp32", "bf16", "fp16", "auto"] = "fp32"  # auto: bf16 where hardware has it
    compile: bool = False  # torch.compile the model
    profile: str | None = None  # aiayn.accel.PROFILES: plain modules, or the tricks (None)
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    dist_timeout_minutes: float = 30.0  # several processes: how long a collective may wait
    threads: int = 0  # torch intra-op threads (0: the cores other processes leave idle)
    max_nonfinite: int = 5  # consecutive non-finite losses before the run stops
    valid_bleu: bool = False  # translation: also decode the validation set and score BLEU
    valid_beam: int = 1  # beam size for validation BLEU (1: greedy)
    valid_tokenize: BleuTokenize = ""  # validation BLEU's tokenizer ("": by target language)
    # With init_from, the [model] fields not set are the model's, those set must agree (but
    # the dropout rates); the optimiser and schedule are this config's, from update 0.
    init_from: str = ""  # a model directory to start from (fine-tuning): its weights

    def __post_init__(self) -> None:
        check_ranges(
            self,
            at_least_1=("max_updates", "log_every", "valid_every", "save_every"),
            at_least_0=("seed", "max_epochs", "max_minutes", "keep_last", "patience", "threads"),
        )
        check_ranges(self, at_least_1=("max_nonfinite", "valid_beam"))
        check_ranges(self, above_0=("dist_timeout_minutes",))


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything ``aiayn train`` needs; saved with every run."""

    task: Literal["translation", "lm"] = "translation"
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    run: RunConfig = dataclasses.field(default_factory=RunConfig)


ExportTarget = Literal["ct2", "hf", "argos"]  # aiayn export TARGET


@dataclass(frozen=True, kw_only=True)
class DistillConfig:
    """Sequence-level knowledge distillation (Kim & Rush, 2016): a teacher model translates a
    corpus's source side with beam search, and a student trains on its translations
    (``aiayn.pipeline.distill_stage``). The translations are kept in shards, the unit of resuming;
    the filters apply to the whole set at the end."""

    teacher: str = ""  # a translation model directory ("": no distillation)
    # the teacher's decoding: SearchOptions fields; text "raw": the corpus as the teacher's
    # subword model reads it, its output as the subword model writes it (no preprocessing)
    decode: SearchOptions = dataclasses.field(
        default_factory=lambda: SearchOptions(text="raw", precision="auto", batch_tokens=2048)
    )
    workers: int = 2  # decoding processes, one thread each
    shard_lines: int = 2000  # source lines per shard
    max_ratio: float = 3.0  # drop pairs whose longer side has more than this many times the
    # pieces of the shorter (EOS counted on both)
    min_score: float = -2.0  # drop translations whose mean log-probability per piece (EOS
    # included) is below this (-2.0: a geometric mean piece probability under 0.135)
    dedupe: bool = True  # keep one copy of a repeated (source, translation) pair

    def __post_init__(self) -> None:
        check_ranges(self, at_least_1=("workers", "shard_lines", "max_ratio"))
        if not self.min_score <= 0:
            raise ValueError(
                f"min_score must be at most 0 (a log-probability), got {self.min_score}"
            )
        if self.decode.nbest != 1:
            raise ValueError("distillation keeps one translation per line: decode.nbest must be 1")


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """The end-to-end recipe around training: which corpus, how to average and decode."""

    dataset: Literal["multi30k", "wmt14", "files"] = "multi30k"
    src_lang: str = "en"
    tgt_lang: str = "de"
    text: Literal["tok", "raw"] = "tok"  # multi30k: Moses-tokenised lowercased files, or raw
    test_splits: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr")  # multi30k
    # dataset "files": your own corpus, file prefixes (PREFIX.src_lang and PREFIX.tgt_lang,
    # plain or .gz, one sentence a line), relative to the recipe file
    train: str = ""
    valid: str = ""
    test: tuple[str, ...] = ()
    pretokenized: bool = False  # files: the text is tokenised (BLEU on its tokens)
    tokenize: BleuTokenize = ""  # BLEU's sacreBLEU tokenizer ("": by tgt_lang, e.g. ko-mecab)
    average_last: int = 10  # checkpoints averaged into the final model (§6.1)
    # > 0: instead, those saved in this last share of the run's budget (its progress, as the
    # budget schedule counts it), at most the run.keep_last kept
    average_share: float = 0.0
    # of run.max_minutes, kept for all but training (preparing, averaging, decoding, scoring):
    # training's own budget is run.max_minutes less this, so the whole job fits in the former
    reserve_minutes: float = 0.0
    # how the test sets are decoded: [pipeline] keys named as SearchOptions fields (beam,
    # alpha unless tune_alpha chooses one, max_len_b, batch_tokens, ...), or a
    # [pipeline.decode] table (where "text" is SearchOptions.text). Test sets are translated
    # line by line as they are (text "raw"): scores on tokenised text compare the model's
    # own tokens with the references'.
    decode: SearchOptions = dataclasses.field(default_factory=lambda: SearchOptions(text="raw"))
    tune_alpha: tuple[float, ...] = ()  # exponents tried on the validation split; best is used
    examples: int = 3  # example translations printed at the end
    test_limit: int = 0  # translate only the first N sentences of each test set (0: all)
    exports: tuple[ExportTarget, ...] = ()  # the model written under exports/ at the end
    # multi30k raw text: also BLEU as the literature scores it (hypotheses normalised,
    # Moses-tokenised and lowercased as the tok/ files were, against those, tokenize none)
    literature_bleu: bool = False
    # [pipeline.distill] with a teacher: the training split's target side is the teacher's
    # translations of its source side (aiayn.pipeline.distill_stage); set prepare.vocab_from to the
    # teacher to train the student on the teacher's tokenizer
    distill: DistillConfig = dataclasses.field(default_factory=DistillConfig)
    # fit the confidence to the validation split's sentence chrF (decoded as the test sets
    # are) into model/calibration.json: every confidence the model gives is then an expected
    # chrF (aiayn calibrate; skipped, with a note, where the confidence does not rank)
    calibrate: bool = True
    # build the model's vocabulary shortlist table from the training corpus into
    # model/shortlist.safetensors, as `aiayn shortlist --best K` does (K: the most a
    # shortlist can decode with)
    shortlist_table: int = 0  # target pieces per source piece in the model's table (0: no table)

    def __post_init__(self) -> None:
        if self.literature_bleu and (self.dataset, self.text) != ("multi30k", "raw"):
            raise ValueError('literature_bleu needs dataset "multi30k" with text "raw"')
        check_ranges(
            self,
            at_least_1=("average_last",),
            at_least_0=("examples", "test_limit", "shortlist_table", "reserve_minutes"),
        )
        if not 0.0 <= self.average_share < 1.0:
            raise ValueError(f"average_share must be in [0, 1), got {self.average_share}")
        if self.decode.shortlist > self.shortlist_table:
            raise ValueError(
                f"shortlist {self.decode.shortlist} decodes with the model's table: set "
                f"shortlist_table to at least {self.decode.shortlist} so the pipeline builds it"
            )
        if self.dataset == "files" and not (self.train and self.valid):
            raise ValueError('dataset "files" needs the train and valid file prefixes')
        if any(not a >= 0 for a in self.tune_alpha):
            raise ValueError(f"tune_alpha values must be at least 0, got {list(self.tune_alpha)}")


def training_warnings(cfg: TrainConfig) -> list[str]:
    """What in ``cfg`` is allowed but likely to give a useless model, one line each."""
    warnings = []
    if cfg.run.max_updates < cfg.optim.warmup_steps:
        warnings.append(
            f"warning: run.max_updates {cfg.run.max_updates:,} ends before the warm-up "
            f"(optim.warmup_steps {cfg.optim.warmup_steps:,}): the learning rate never reaches "
            "its peak and the model stays weak; lower optim.warmup_steps with it"
        )
    return warnings


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A pipeline file: ``[pipeline]``, ``[prepare]`` and the training tables."""

    pipeline: PipelineConfig
    prepare: dict[str, Any]  # PrepareConfig fields other than the languages and files
    train: TrainConfig

    def __post_init__(self) -> None:
        whole, reserve = self.train.run.max_minutes, self.pipeline.reserve_minutes
        if whole and reserve >= whole:
            raise ValueError(
                f"pipeline.reserve_minutes {reserve:g} leaves no time to train within "
                f"run.max_minutes {whole:g}"
            )
