"""Decoding speed, side by side: aiayn (KV cache), Hugging Face Marian, CTranslate2 and a
no-cache loop.

    python bench/decode.py [--sizes tiny base marian] [--precisions fp32 bf16 int8] [--repeats 3]
                           [--rounds 3] [--isa avx2] [--shortlist K]

Sentences per second for greedy search and beam search on a batch of 64 sentences of 15
source tokens (Multi30k length), with exactly 40 decoding steps for every system (EOS is
held back until the last step), 2 threads. Each system runs in its own process; the
allocator is named in every row (aiayn's rows keep oneDNN's kernel cache at 64 entries, as
``aiayn translate`` does). Medians of ``--repeats`` timed runs per process, then over
``--rounds`` passes through all the rows (a slow spell of a shared machine falls on every
system alike). "aiayn bf16" is ``--precision bf16``: matrix products in bfloat16, through
weights packed once in bfloat16; "aiayn int8" is ``--precision int8``: every linear map in
int8 (per-channel weights, activations quantised at each call), beside CTranslate2's int8
on the same weights. ``--precisions`` picks aiayn's rows (default: those this
CPU computes in hardware; bf16 is left out where it is emulated: neither AVX512-BF16 nor
AMX); the first line names the CPU and its instruction set. ``--isa avx2`` holds every
system, in every process, to AVX2 by each library's own switch (``common.ISAS``: PyTorch,
oneDNN, MKL, FBGEMM, CTranslate2), and the header names what each then runs: an AVX2
machine, emulated on an AVX512 one.

``--shortlist K`` adds rows "aiayn shortlist" (with each precision): decoding with a
vocabulary shortlist (``aiayn.accel.shortlist``) of K pieces per source piece, from a
synthetic table (each source piece's 100 pieces drawn by Zipf's law over the target ids, the
100 lowest ids always allowed; the row names how many pieces its batch allows); with
``--model``, the model directory's own table (``aiayn shortlist``), its BLEU beside the rest.

- ``tiny`` and ``base``: random aiayn weights of those presets, vocabulary 10,000, beam 5.
  CTranslate2 decodes the same weights (converted by ``aiayn.interop.ct2``, the code of
  ``aiayn export ct2``); HF Marian is a random model of the same dimensions.
- ``marian``: a random Hugging Face ``MarianMTModel`` of opus-mt-base shape (d_model 512,
  6 + 6 layers, swish, [sin | cos] positions, vocabulary 58,101, an output bias), imported by
  ``aiayn import marian`` and exported again by ``aiayn export ct2``: the three systems
  decode the very same weights, beam 4 (opus-mt's).

CTranslate2's greedy output is checked against aiayn's, token for token. Its process never
imports torch.

    python bench/decode.py --model DIR [--test FILE.src FILE.ref] [--tokenized] [--rounds R]

decodes a test set with a trained model, as a user would: aiayn's ``Translator`` (batches of
4,096 source tokens sorted by length) in every mode (fp32, bf16 and int8; greedy, and beam 5 with
α 0.6 by each stopping rule: ``exact``, the default, ``beams`` and ``heuristic``) and
CTranslate2 float32 and int8 on the same weights (``aiayn export ct2``; batches of 4,096
tokens; beam 5 stops when 5 hypotheses have finished, its rule), each row in its own
process, the same subword ids in. Prints each row's BLEU, its difference from aiayn fp32
(exact stopping for beam search) and its sentences/s (decoding and detokenising with the
model's own tokenizer, for every system; median of the rounds), then, for greedy and
beam search, the fastest aiayn mode within 0.3 BLEU of fp32 (int8: 0.5) against
CTranslate2's fastest.
By default the Multi30k test2016 files, tokenised and lowercased, under ``AIAYN_DATA_DIR``
(``../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import (
    ISAS,
    SIZES,
    VOCAB,
    aiayn_config,
    hold_to_isa,
    instruction_set,
    marian_model,
    measure_in_subprocess,
    native_precisions,
    set_up_allocator,
)

from aiayn.memory import limit_kernel_cache  # imports no torch

SENTENCES, SRC_LEN, STEPS = 64, 15, 40
ALL_SIZES = (*SIZES, "marian")
MARIAN_VOCAB = 58_101  # opus-mt-en-de's
BEAM = {"tiny": 5, "base": 5, "marian": 4}
SHORTLISTED = " shortlist"  # a system name with this suffix: decoding with --shortlist K
SYSTEMS = [  # (system, allocator)
    ("aiayn", "tuned"),
    ("aiayn bf16", "tuned"),
    ("aiayn int8", "tuned"),
    ("aiayn" + SHORTLISTED, "tuned"),
    ("aiayn bf16" + SHORTLISTED, "tuned"),
    ("aiayn int8" + SHORTLISTED, "tuned"),
    ("HF Marian", "default"),
    ("CTranslate2 float32", "default"),
    ("CTranslate2 int8", "default"),
    ("no-cache loop", "tuned"),
]
PRECISIONS = ("fp32", "bf16", "int8")  # aiayn's decoding precisions, each a row of its own
PRECISION_OF = {
    "aiayn": "fp32",
    "aiayn bf16": "bf16",
    "aiayn int8": "int8",
    "no-cache loop": "fp32",
}
PRECISION_OF |= {
    f"{s}{SHORTLISTED}": PRECISION_OF[s] for s in ("aiayn", "aiayn bf16", "aiayn int8")
}
AIAYN_SYSTEMS = set(PRECISION_OF)
SHORTLIST_TABLE = 100  # the synthetic table's pieces per source piece (the most --shortlist K)
SHORTLIST_FREQUENT = 100  # ... and its frequent pieces, always allowed


def wanted(system: str, precisions: list[str], shortlist: int = 0) -> bool:
    """Whether ``system``'s rows run: a peer always, an aiayn row in ``precisions``, a
    shortlist row with ``--shortlist`` only."""
    if system.endswith(SHORTLISTED) and not shortlist:
        return False
    return system not in PRECISION_OF or PRECISION_OF[system] in precisions


def searches(size: str) -> list[str]:
    return ["greedy", f"beam{BEAM[size]}"]


def vocab_size(size: str) -> int:
    return MARIAN_VOCAB if size == "marian" else VOCAB


def source(size: str):
    """(B, S) source ids ending in EOS, avoiding the special ids."""
    import torch

    g = torch.Generator().manual_seed(0)
    if size == "marian":  # EOS 0, UNK 1, PAD last
        src = torch.randint(2, MARIAN_VOCAB - 1, (SENTENCES, SRC_LEN), generator=g)
        src[:, -1] = 0
    else:
        src = torch.randint(4, VOCAB, (SENTENCES, SRC_LEN), generator=g)
        src[:, -1] = 3
    return src


class HoldEOS:
    """Wraps a step decoder so EOS is (almost) never chosen before the forced last step."""

    def __init__(self, inner, eos: int):
        self.inner, self.eos = inner, eos

    def start(self, src):
        return self.inner.start(src)

    def step(self, tokens, state, *, normalize=True):
        scores, state = self.inner.step(tokens, state, normalize=normalize)
        scores[:, self.eos] -= 1e4
        return scores, state

    def reorder(self, state, index, *, sentences=None):
        return self.inner.reorder(state, index, sentences=sentences)


def aiayn_model(size: str, work: Path):
    """The model every aiayn row and CTranslate2 decode: random for tiny and base (seed 0),
    the imported Marian model otherwise."""
    import torch

    from aiayn.models import build_model
    from aiayn.store import load_model

    if size == "marian":
        return load_model(work / "aiayn")[0]
    torch.manual_seed(0)
    return build_model(aiayn_config(size)).eval()


def synthetic_shortlist(size: str):
    """A lexical table for a random model (``aiayn.accel.shortlist.Shortlist``): each
    source piece's ``SHORTLIST_TABLE`` pieces drawn from a Zipf distribution over the
    target ids (a word's likeliest translations are mostly frequent words, so those of a
    batch's words overlap as in a real table), the ``SHORTLIST_FREQUENT`` lowest ids (the
    most frequent under that law) always allowed."""
    import torch

    from aiayn.accel.shortlist import Shortlist

    vocab = vocab_size(size)
    g = torch.Generator().manual_seed(0)
    law = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)  # (V,) Zipf, exponent 1
    cdf = (law.cumsum(0) / law.sum()).float()  # (V,)
    best = torch.searchsorted(cdf, torch.rand(vocab, SHORTLIST_TABLE, generator=g))  # (V, K)
    best = best.clamp(max=vocab - 1)
    return Shortlist(best, torch.arange(SHORTLIST_FREQUENT))


def aiayn_runner(
    size: str, search: str, work: Path, *, cached: bool, precision: str, shortlist: int = 0
):
    import torch

    from aiayn.accel.shortlist import ShortlistStepper
    from aiayn.decode import beam_search, greedy_search, stepper_for
    from aiayn.modules.stepper import UncachedTransformerStepper

    model = aiayn_model(size, work)
    inner = stepper_for(model, precision=precision) if cached else UncachedTransformerStepper(model)
    stepper = HoldEOS(inner, model.specials.eos)
    src = source(size)
    table = synthetic_shortlist(size) if shortlist else None
    allowed = len(table.rows(src, shortlist, model.specials)) if table is not None else None

    def run():
        nonlocal stepper
        if table is not None:  # per batch, as aiayn.translate.translator does
            rows = table.rows(src, shortlist, model.specials)  # (K,)
            listed = ShortlistStepper(inner, rows, vocab_size(size))
            stepper = HoldEOS(listed, model.specials.eos)
        with torch.inference_mode():
            if search == "greedy":
                greedy_search(
                    stepper,
                    src,
                    max_len=STEPS,
                    specials=model.specials,
                    argmax=model.profile.argmax,
                )
            else:
                beam_search(
                    stepper,
                    src,
                    beam=BEAM[size],
                    max_len_b=STEPS - SRC_LEN,
                    specials=model.specials,
                    extensions=model.profile.extensions,
                )

    return run, allowed


def marian_runner(size: str, search: str, work: Path):
    import torch
    from transformers import MarianMTModel

    model = (
        MarianMTModel.from_pretrained(work / "hf") if size == "marian" else marian_model(size)
    ).eval()
    src = source(size)
    beams = 1 if search == "greedy" else BEAM[size]

    def run():
        with torch.inference_mode():
            model.generate(
                input_ids=src,
                attention_mask=torch.ones_like(src),
                num_beams=beams,
                do_sample=False,
                min_new_tokens=STEPS,
                max_new_tokens=STEPS,
            )

    return run


def placeholder_vocab(size: int) -> list[str]:
    """Token names for a random model without a tokenizer: aiayn's special ids 0-3 under
    CTranslate2's names, then ``t4``, ``t5``, ..."""
    return ["<blank>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, size)]


def prepare(size: str, work: Path) -> dict:
    """Everything the rows of ``size`` share, written into ``work``: for ``marian``, the
    Hugging Face model, its import and its CTranslate2 export; for the others, the
    CTranslate2 conversion of the random aiayn model. Also aiayn's greedy output, which
    CTranslate2's is checked against."""
    import torch

    from aiayn.decode import greedy_search, stepper_for

    torch.set_num_threads(2)
    if size == "marian":
        from aiayn.interop.ct2 import export_ct2
        from aiayn.interop.marian import import_marian

        write_marian(work / "hf")
        import_marian(work / "hf", work / "aiayn")
        export_ct2(work / "aiayn", work / "ct2")
        model = aiayn_model(size, work)
        vocab = json.loads((work / "hf" / "vocab.json").read_text())
        vocab = sorted(vocab, key=vocab.get)
    else:
        from aiayn.interop.ct2 import convert

        model = aiayn_model(size, work)
        vocab = placeholder_vocab(VOCAB)
        convert(model, vocab, vocab, str(work / "ct2"))
    src = source(size)
    with torch.inference_mode():
        stepper = HoldEOS(stepper_for(model), model.specials.eos)
        out = greedy_search(stepper, src, max_len=STEPS, specials=model.specials)  # (B, T)
    reference = {
        "source": [[vocab[i] for i in row] for row in src[:, :-1].tolist()],  # CT2 adds EOS
        "aiayn_greedy": [[vocab[i] for i in row] for row in out[:, : STEPS - 1].tolist()],
    }
    (work / "reference.json").write_text(json.dumps(reference))
    return {"prepared": str(work)}


def write_marian(directory: Path) -> None:
    """A random MarianMTModel of opus-mt-base shape with Marian tokenizer files."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from aiayn.data import train_sentencepiece

    directory.mkdir(parents=True, exist_ok=True)
    words = [f"w{i}" for i in range(3000)]
    text = (" ".join(words[(i * 7 + j) % 3000] for j in range(12)) for i in range(3000))
    train_sentencepiece(text, directory / "source.spm", vocab_size=2000)
    (directory / "target.spm").write_bytes((directory / "source.spm").read_bytes())
    tokens = ["</s>", "<unk>", *[f"▁w{i}" for i in range(MARIAN_VOCAB - 3)], "<pad>"]
    (directory / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    config = MarianConfig(
        vocab_size=MARIAN_VOCAB,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=MARIAN_VOCAB - 1,
        eos_token_id=0,
        decoder_start_token_id=MARIAN_VOCAB - 1,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.1)
    model.save_pretrained(directory)


def ct2_runner(search: str, compute_type: str, size: str, work: Path):
    """CTranslate2 on the exported model; returns the run and a check of its greedy output."""
    import ctranslate2

    reference = json.loads((work / "reference.json").read_text())
    batch = reference["source"]
    translator = ctranslate2.Translator(
        str(work / "ct2"),
        device="cpu",
        compute_type=compute_type,
        inter_threads=1,
        intra_threads=2,
    )
    options = dict(
        beam_size=1 if search == "greedy" else BEAM[size],
        min_decoding_length=STEPS,
        max_decoding_length=STEPS,
        max_batch_size=SENTENCES,
    )

    def run():
        return translator.translate_batch(batch, **options)

    def agreement() -> float:
        """The share of sentences whose first STEPS - 1 tokens equal aiayn's greedy ones."""
        results = translator.translate_batch(batch, **{**options, "beam_size": 1})
        ours = reference["aiayn_greedy"]
        same = [r.hypotheses[0][: STEPS - 1] == o for r, o in zip(results, ours, strict=True)]
        return sum(same) / len(same)

    return run, agreement


def worker(
    system: str, size: str, search: str, repeats: int, work: Path, shortlist: int = 0
) -> dict:
    if size == TRAINED:
        return trained_worker(system, search, repeats, work, shortlist)
    extra = {}
    if system.startswith("CTranslate2"):
        run, agreement = ct2_runner(search, system.split()[1], size, work)
        if search == "greedy":
            extra["same_as_aiayn"] = agreement()
    else:
        import torch

        torch.set_num_threads(2)
        if system == "HF Marian":
            torch.manual_seed(0)
            run = marian_runner(size, search, work)
        else:
            cached = system != "no-cache loop"
            precision = PRECISION_OF[system]
            listed = shortlist if system.endswith(SHORTLISTED) else 0
            run, allowed = aiayn_runner(
                size, search, work, cached=cached, precision=precision, shortlist=listed
            )
            extra |= {"allowed": allowed} if listed else {}
    seconds, _ = timed(run, repeats)
    return {"sentences_per_s": SENTENCES / seconds, **extra}


def timed(run, repeats: int) -> tuple[float, object]:
    """The median seconds of ``repeats`` calls after a warm-up call, and the last result."""
    result = run()  # warm-up
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - begin)
    return statistics.median(times), result


def default_test_files() -> list[str]:
    root = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data")) / "multi30k" / "tok"
    return [str(root / f"test_2016_flickr.lc.norm.tok.{lang}.gz") for lang in ("en", "de")]


TRAINED = "trained"  # the size argument of a worker decoding the --model's test set
TRAINED_BEAM = 5
BLEU_TOLERANCE = 0.3  # an aiayn mode counts as fast only this close to fp32's BLEU
INT8_BLEU_TOLERANCE = 0.5  # ... int8 this close (CTranslate2's int8 is held to none)


def tolerance(system: str) -> float:
    """How far from aiayn fp32's BLEU a row of ``system`` may be and count as fast."""
    return INT8_BLEU_TOLERANCE if PRECISION_OF.get(system) == "int8" else BLEU_TOLERANCE


TRAINED_SYSTEMS = [
    ("aiayn", "tuned"),
    ("aiayn bf16", "tuned"),
    ("aiayn int8", "tuned"),
    ("aiayn" + SHORTLISTED, "tuned"),
    ("aiayn int8" + SHORTLISTED, "tuned"),
    ("CTranslate2 float32", "default"),
    ("CTranslate2 int8", "default"),
]


def trained_searches(system: str) -> list[str]:
    """Greedy, then beam search by each stopping rule aiayn has (CTranslate2: its own,
    "beams")."""
    from aiayn.search_options import STOPPING  # imports no torch: CTranslate2's rows

    beam = f"beam{TRAINED_BEAM}"
    if system.startswith("CTranslate2"):
        return ["greedy", beam]
    return ["greedy", beam, *(f"{beam} {rule}" for rule in list(STOPPING)[1:])]


def prepare_trained(model_dir: str, src_tokenizer, source_path: str, work: Path) -> int:
    """Write into ``work`` what the rows share: the test sources as the model's subword ids
    (aiayn) and as the exported vocabulary's tokens (CTranslate2), and the model's
    CTranslate2 export when CTranslate2 is installed. Returns the number of sentences."""
    import importlib.util

    from aiayn.data.corpus import read_lines
    from aiayn.translate.translator import SearchOptions

    ids = src_tokenizer.encode([line.strip() for line in read_lines(source_path)])
    info = {"model": model_dir, "ids": ids}
    if importlib.util.find_spec("ctranslate2") is not None:
        from aiayn.interop.ct2 import export_ct2

        export_ct2(model_dir, work / "ct2")
        vocab = ct2_vocabulary(work, "source")
        info["pieces"] = [[vocab[i] for i in row] for row in ids]
        info["max_decoding_length"] = max(map(len, ids)) + 1 + SearchOptions().max_len_b
    (work / "trained.json").write_text(json.dumps(info))
    return len(ids)


def ct2_vocabulary(work: Path, side: str) -> list[str]:
    """The exported model's tokens on ``side`` ("source" or "target"): one shared file when
    the model shares its vocabulary, one per side otherwise; none without an export."""
    for name in ("shared_vocabulary.json", f"{side}_vocabulary.json"):
        path = work / "ct2" / name
        if path.is_file():
            return json.loads(path.read_text())
    return []


def trained_worker(system: str, search: str, repeats: int, work: Path, shortlist: int) -> dict:
    """One row on the trained model: sentences/s and the translations (texts: every row
    detokenises its output with the model's own target tokenizer, inside the timing)."""
    info = json.loads((work / "trained.json").read_text())
    beam = 1 if search == "greedy" else TRAINED_BEAM
    stopping = search.split()[1] if " " in search else "exact"
    if system.startswith("CTranslate2"):
        import ctranslate2

        from aiayn.data.tokenizer_files import load_tokenizers  # imports no torch

        translator = ctranslate2.Translator(
            str(work / "ct2"),
            device="cpu",
            compute_type=system.split()[1],
            inter_threads=1,
            intra_threads=2,
        )
        options = dict(
            beam_size=beam,
            length_penalty=0.6,
            max_batch_size=4096,
            batch_type="tokens",
            max_decoding_length=info["max_decoding_length"],
        )

        _, detokenizer, _ = load_tokenizers(info["model"])
        target_id = {token: i for i, token in enumerate(ct2_vocabulary(work, "target"))}

        def run():  # as aiayn's rows: tokens to text, the same text for the same tokens
            results = translator.translate_batch(info["pieces"], **options)
            return [detokenizer.decode([target_id[t] for t in r.hypotheses[0]]) for r in results]

    else:
        import torch

        from aiayn.translate.translator import SearchOptions, Translator

        torch.set_num_threads(2)
        translator = Translator.from_dir(info["model"])
        precision = PRECISION_OF[system]
        listed = shortlist if system.endswith(SHORTLISTED) else 0
        search_options = SearchOptions(
            beam=beam, alpha=0.6, precision=precision, stopping=stopping, shortlist=listed
        )

        def run():
            return [h[0].text for h in translator.translate_ids(info["ids"], search_options)]

    seconds, output = timed(run, repeats)
    return {"sentences_per_s": len(info["ids"]) / seconds, "output": output}


def compare_trained(
    model_dir: str,
    test: list[str],
    *,
    tokenized: bool,
    repeats: int,
    rounds: int,
    precisions: list[str],
    shortlist: int,
) -> None:
    """Every system and mode on a trained model's test set: BLEU and sentences/s."""
    from aiayn.data.corpus import read_lines
    from aiayn.data.tokenizer_files import load_tokenizers
    from aiayn.eval.bleu import corpus_scores

    references = list(read_lines(test[1]))
    src_tokenizer, _, _ = load_tokenizers(model_dir)
    rows = [
        (system, search, allocator)
        for system, allocator in TRAINED_SYSTEMS
        if wanted(system, precisions, shortlist)
        for search in trained_searches(system)
    ]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        sentences = prepare_trained(model_dir, src_tokenizer, test[0], work)
        measured = run_rounds(rows, TRAINED, repeats, rounds, str(work), shortlist)

    print(
        f"\n{model_dir}: {test[0]} ({sentences} sentences), batches of 4,096 source tokens, "
        f"α 0.6, 2 threads, medians of {rounds} round(s)"
    )
    print(f"  {'system':20} {'search':15} {'allocator':9} {'BLEU':>6} {'vs fp32':>8} {'sent/s':>7}")
    found: dict[tuple[str, str], tuple[float, float]] = {}  # (BLEU, sentences/s) of each row
    fp32: dict[str, float] = {}  # aiayn fp32's BLEU, greedy and beam (exact stopping)
    for (system, search, allocator), runs in measured.items():
        if isinstance(runs, str):
            print(f"  {system:20} {search:15} {allocator:9} failed ({runs})")
            continue
        bleu = corpus_scores(runs[-1]["output"], references, tokenized=tokenized)
        if system == "aiayn":
            fp32.setdefault(search.split()[0], bleu.bleu)
        speed = statistics.median(r["sentences_per_s"] for r in runs)
        found[(system, search)] = (bleu.bleu, speed)
        reference = fp32.get(search.split()[0])
        diff = "n/a" if reference is None else f"{bleu.bleu - reference:+.2f}"
        print(
            f"  {system:20} {search:15} {allocator:9} {bleu.bleu:6.2f} {diff:>8} {speed:7.1f}",
            flush=True,
        )
    for kind in ("greedy", f"beam{TRAINED_BEAM}"):
        rows_ = {row: value for row, value in found.items() if row[1].split()[0] == kind}
        ours = {
            row: speed
            for row, (bleu, speed) in rows_.items()
            if row[0].startswith("aiayn")
            and abs(bleu - fp32.get(kind, math.inf)) <= tolerance(row[0])
        }
        theirs = {row: speed for row, (_, speed) in rows_.items() if row[0].startswith("CT")}
        if ours and theirs:
            best, peer = max(ours, key=ours.get), max(theirs, key=theirs.get)
            print(
                f"  fastest {kind} within {BLEU_TOLERANCE} BLEU of aiayn fp32 "
                f"({INT8_BLEU_TOLERANCE} for int8): "
                f"{' '.join(best)} / {' '.join(peer)}: {ours[best] / theirs[peer]:.2f}x"
            )


def run_rounds(
    rows: list, size: str, repeats: int, rounds: int, work: str, shortlist: int = 0
) -> dict:
    """Every row once per round, each in its own process, so that a slow spell of a shared
    machine falls on all systems alike: per row, its results, or why it failed."""
    measured: dict[tuple[str, str, str], list[dict] | str] = {row: [] for row in rows}
    for _ in range(rounds):
        for row in rows:
            system, search, allocator = row
            result = measure_in_subprocess(
                __file__,
                [system, size, search, allocator],
                allocator,
                ["--repeats", str(repeats), "--work", work, "--shortlist", str(shortlist)],
            )
            if isinstance(result, str):
                measured[row] = result
            elif isinstance(measured[row], list):
                measured[row].append(result)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="+", default=list(ALL_SIZES), choices=ALL_SIZES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="passes over all the rows")
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=PRECISIONS,
        help="aiayn's rows (default: those this CPU computes in hardware)",
    )
    parser.add_argument(
        "--isa",
        choices=list(ISAS),
        default="native",
        help="hold every system to this instruction set (avx2: an AVX2 machine emulated)",
    )
    parser.add_argument(
        "--shortlist",
        type=int,
        default=0,
        metavar="K",
        help="add rows decoding with a vocabulary shortlist of K pieces per source piece "
        f"(synthetic table, K <= {SHORTLIST_TABLE}; --model: the model's own table)",
    )
    parser.add_argument("--worker", nargs=4, metavar=("SYSTEM", "SIZE", "SEARCH", "ALLOC"))
    parser.add_argument("--prepare", nargs=2, metavar=("SIZE", "DIR"))
    parser.add_argument("--work")
    parser.add_argument("--model", help="a trained model directory: its test set, every system")
    parser.add_argument("--test", nargs=2, metavar=("SRC", "REF"), default=default_test_files())
    parser.add_argument(
        "--tokenized",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="score tokenised, lowercased text as it is (the Multi30k literature's way)",
    )
    args = parser.parse_args()
    if args.worker:
        system, size, search, allocator = args.worker
        set_up_allocator(allocator)
        if system in AIAYN_SYSTEMS:
            limit_kernel_cache()  # as `aiayn translate` does
        result = worker(system, size, search, args.repeats, Path(args.work), args.shortlist)
        print(json.dumps(result))
    elif args.prepare:
        print(json.dumps(prepare(args.prepare[0], Path(args.prepare[1]))))
    else:
        held = hold_to_isa(args.isa)  # before this process imports torch
        print(instruction_set(), *held, sep="\n", flush=True)
        precisions = args.precisions or native_precisions(PRECISIONS, args.isa)
        options = dict(
            repeats=args.repeats,
            rounds=args.rounds,
            precisions=precisions,
            shortlist=args.shortlist,
        )
        if args.model:
            compare_trained(args.model, args.test, tokenized=args.tokenized, **options)
        for size in [] if args.model else args.sizes:
            with tempfile.TemporaryDirectory() as work:
                bench_size(size, work=work, **options)


def bench_size(
    size: str, *, repeats: int, rounds: int, precisions: list[str], shortlist: int, work: str
) -> None:
    """Every row once per round, so that a slow spell of a shared machine falls on all
    systems alike; each row's figure is the median over rounds."""
    beam = BEAM[size]
    print(f"\n{size}: sentences/s, {SENTENCES} sentences, {STEPS} steps, 2 threads, medians")
    prepared = measure_in_subprocess(__file__, [], "tuned", ["--prepare", size, work])
    if isinstance(prepared, str):
        print(f"  preparation failed: {prepared}")
        return
    rows = [
        (system, search, allocator)
        for system, allocator in SYSTEMS
        if wanted(system, precisions, shortlist)
        for search in searches(size)
        if not (system == "no-cache loop" and (size != "tiny" or search != "greedy"))
    ]
    measured = run_rounds(rows, size, repeats, rounds, work, shortlist)
    print(f"  {'system':20} {'search':7} {'allocator':9} {'sent/s':>8}")
    results = {}
    for (system, search, allocator), runs in measured.items():
        if isinstance(runs, str):
            print(f"  {system:20} {search:7} {allocator:9} {'failed':>8}  ({runs})")
            continue
        value = statistics.median(r["sentences_per_s"] for r in runs)
        results[(system, search)] = value
        check = runs[0].get("same_as_aiayn")
        note = f"  greedy output equal to aiayn's: {check:.0%} of sentences" if check else ""
        if "allowed" in runs[0]:
            note += f"  {runs[0]['allowed']:,} of {vocab_size(size):,} pieces allowed"
        print(f"  {system:20} {search:7} {allocator:9} {value:>8.1f}{note}", flush=True)
    for search in ("greedy", f"beam{beam}"):
        for ours_name in [s for s in PRECISION_OF if s != "no-cache loop"]:
            ours = results.get((ours_name, search))
            for peer in ("HF Marian", "CTranslate2 float32", "CTranslate2 int8"):
                theirs = results.get((peer, search))
                if ours and theirs:
                    print(f"  {ours_name} / {peer}, {search}: {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
