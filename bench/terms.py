"""Protected spans, glossaries and confidence, measured on a trained model and Multi30k's
test sets (raw, cased text: what the model translates as a user's text).

    python bench/terms.py --model DIR [--sets 2016 2017 val] [--parts spans glossary confidence]
        [--src en --tgt de] [--beam 5] [--limit N] [--seed 0]

- spans: a placeholder, inline code, a URL or an e-mail address (``SPANS``) is put between
  two words of a seeded 30% of the source lines. Each line is translated with protected
  spans (the default: sentinels the model may copy, each span put back where its sentinel
  is or, where the model left it out, where the span stood), with the sentinels imposed on
  the beam search (``impose_spans``) and with protection off. Prints the share of spans
  that came back verbatim exactly once, the share of lines whose every sentinel the model
  wrote itself, the share of spans the default puts within one word of where the imposed
  search (the model itself) puts them, and the BLEU of the whole set with each span taken
  out of its output, against the clean set's.
- glossary: for a seeded choice of 1-2 content words of each reference line, the source
  word of its line that co-occurs with it most in the training corpus (Dice coefficient
  over its lines, at least ``MIN_DICE``) makes a glossary entry of that line. Lines with
  entries are translated one at a time, with and without their glossary: the share of
  lines whose every target term appears, BLEU of the set, and the seconds each way.
- confidence: Spearman's correlation between each line's confidence and its sentence chrF,
  and how far the confidence is from the chrF (0 to 1), the model's own and calibrated
  (``aiayn.eval.calibration_fit``, fitted on ``val``: printed first).

Corpora under ``AIAYN_DATA_DIR`` (default ``../shared/data``): ``multi30k/train.*.gz`` and
``multi30k/test_YEAR_flickr.*.gz``, ``multi30k/val.*.gz`` (``--sets val``: the validation
set, where variants are chosen before the test sets are measured; ``confidence`` is
calibrated on it, so it measures ``spans`` and ``glossary`` there).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import random
import re
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

SPANS = (
    "{{name}}",
    "%s",
    "%(count)d",
    "${HOME}",
    "{0}",
    "$USER",
    "`make test`",
    "https://example.org/p?id=<n>",
    "anna.<n>@example.com",
)
FRACTION = 0.3  # of the source lines that get a span
MIN_DICE = 0.2  # a glossary entry's source and target words co-occur at least this much
STOPWORDS = {  # German and French function words never chosen as glossary terms
    "eine", "einer", "einem", "einen", "eines", "der", "die", "das", "dem", "den", "des",
    "und", "oder", "mit", "auf", "von", "vor", "neben", "sich", "sind", "ist",
    "während", "ihre", "seine", "ihrem", "seinem", "zwei", "drei", "hinter", "unter",
    "über", "durch", "nach", "einige", "viele", "beim", "etwas", "dans", "avec",
    "pour", "sont", "leur", "leurs", "une", "les", "sur", "deux", "trois",
}  # fmt: skip
WORD = re.compile(r"\w+")


def data_dir() -> Path:
    return Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data")) / "multi30k"


def set_name(name: str) -> str:
    """The corpus of a ``--sets`` value: ``val``, or a test set's year."""
    return name if name == "val" else f"test_{name}_flickr"


def read(path: Path, limit: int | None = None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return lines[:limit] if limit else lines


def without(text: str, span: str) -> str:
    """``text`` with ``span`` taken out and the spacing it leaves tidied."""
    text = re.sub(r"\s+", " ", text.replace(span, " ")).strip()
    return re.sub(r"\s+([.,!?;:])", r"\1", text)


def words_before(text: str, span: str) -> int:
    """How many words of ``text`` come before ``span`` (its first occurrence)."""
    return len(text[: text.find(span)].split())


def inject(lines: list[str], seed: int) -> dict[int, tuple[str, str]]:
    """For a seeded ``FRACTION`` of the lines: (the line with a span inserted, the span)."""
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(lines)), round(FRACTION * len(lines))))
    out = {}
    for i in chosen:
        words = lines[i].split()
        span = rng.choice(SPANS).replace("<n>", str(rng.randint(1, 999)))
        words.insert(rng.randint(0, max(len(words) - 1, 0)), span)
        out[i] = (" ".join(words), span)
    return out


def spans(translator, options, src: list[str], ref: list[str], seed: int) -> dict:
    from aiayn.eval import corpus_scores
    from aiayn.text.protect import compile_patterns, mask

    injected = inject(src, seed)
    tgt_lang = translator.tgt_lang
    clean = [h[0].text for h in translator.translate(src, options)]
    lines = list(injected)
    texts = [injected[i][0] for i in lines]
    masked = [mask(t, compile_patterns(())) for t in texts]
    off = dataclasses.replace(options, protect=False)
    raw = [h[0].text for h in translator.translate([m.text for m in masked], off)]
    imposed = dataclasses.replace(options, impose_spans=True)
    variants = {  # the default, as Translator.translate does it, its model output kept
        "protected (default)": [m.restore(r) for m, r in zip(masked, raw, strict=True)],
        "protected, sentinels imposed": [h[0].text for h in translator.translate(texts, imposed)],
        "not protected": [h[0].text for h in translator.translate(texts, off)],
    }
    placed = [
        all(re.search(rf"(?<!\w){re.escape(s.sentinel)}(?!\w)", r) for s in m.spans)
        for m, r in zip(masked, raw, strict=True)
    ]
    agree = [
        abs(words_before(d, injected[i][1]) - words_before(m, injected[i][1])) <= 1
        for i, d, m in zip(lines, *(variants[k] for k in list(variants)[:2]), strict=True)
        if d.count(injected[i][1]) == m.count(injected[i][1]) == 1
    ]
    result = {
        "lines with a span": len(lines),
        "BLEU clean": round(corpus_scores(clean, ref, tgt_lang=tgt_lang).bleu, 2),
        "spans the model placed itself % (default)": round(100 * sum(placed) / len(placed), 2),
        "default within a word of where the imposed search puts the span %": round(
            100 * sum(agree) / max(len(agree), 1), 2
        ),
    }
    for name, outputs in variants.items():
        kept = [o.count(injected[i][1]) == 1 for i, o in zip(lines, outputs, strict=True)]
        hyps = list(clean)
        for i, o in zip(lines, outputs, strict=True):
            hyps[i] = without(o, injected[i][1])
        result[f"{name}: spans verbatim once %"] = round(100 * sum(kept) / len(kept), 2)
        result[f"{name}: BLEU rest"] = round(corpus_scores(hyps, ref, tgt_lang=tgt_lang).bleu, 2)
    return result


def dice_table(src_lang: str, tgt_lang: str) -> tuple[dict, dict]:
    """Each word's set of training lines, per language (lowercased)."""
    lines = {}
    for lang in (src_lang, tgt_lang):
        where: dict[str, set[int]] = defaultdict(set)
        for n, line in enumerate(read(data_dir() / f"train.{lang}.gz")):
            for word in set(WORD.findall(line.lower())):
                where[word].add(n)
        lines[lang] = where
    return lines[src_lang], lines[tgt_lang]


def glossaries(src: list[str], ref: list[str], seed: int, src_lang: str, tgt_lang: str):
    """Each line's glossary pairs (possibly none), seeded."""
    from_src, from_tgt = dice_table(src_lang, tgt_lang)
    rng = random.Random(seed)
    found = []
    for s, r in zip(src, ref, strict=True):
        candidates = [
            w for w in dict.fromkeys(WORD.findall(r)) if len(w) >= 4 and w.isalpha()
            and w.lower() not in STOPWORDS
        ]  # fmt: skip
        rng.shuffle(candidates)
        want, pairs, used = rng.randint(1, 2), [], set()
        for target in candidates:
            t_lines = from_tgt.get(target.lower(), set())
            best, score = None, 0.0
            for source in dict.fromkeys(w for w in WORD.findall(s) if len(w) >= 3):
                s_lines = from_src.get(source.lower(), set())
                if not s_lines or not t_lines or source.lower() in used:
                    continue
                dice = 2 * len(s_lines & t_lines) / (len(s_lines) + len(t_lines))
                if dice > score:
                    best, score = source, dice
            if best is not None and score >= MIN_DICE:
                pairs.append((best, target))
                used.add(best.lower())
            if len(pairs) == want:
                break
        found.append(pairs)
    return found


def has_term(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE) is not None


def glossary(translator, options, src, ref, seed, src_lang, tgt_lang) -> dict:
    from aiayn.eval import corpus_scores
    from aiayn.text.glossary import Glossary

    per_line = glossaries(src, ref, seed, src_lang, tgt_lang)
    plain = [h[0].text for h in translator.translate(src, options)]
    forced = list(plain)
    lines = [i for i, pairs in enumerate(per_line) if pairs]
    seconds = {"without": 0.0, "with": 0.0}
    before = []
    for i in lines:
        start = time.perf_counter()
        [[alone]] = translator.translate([src[i]], options)
        seconds["without"] += time.perf_counter() - start
        terms = dataclasses.replace(options, glossary=Glossary.from_pairs(per_line[i]))
        start = time.perf_counter()
        [[found]] = translator.translate([src[i]], terms)
        seconds["with"] += time.perf_counter() - start
        forced[i] = found.text
        before.append(all(has_term(alone.text, t) for _, t in per_line[i]))
    met = [all(has_term(forced[i], t) for _, t in per_line[i]) for i in lines]
    tgt = translator.tgt_lang
    return {
        "lines with a glossary": len(lines),
        "terms": sum(len(per_line[i]) for i in lines),
        "term rate % without glossary": round(100 * sum(before) / max(len(lines), 1), 2),
        "term rate % with glossary": round(100 * sum(met) / max(len(lines), 1), 2),
        "BLEU without": round(corpus_scores(plain, ref, tgt_lang=tgt).bleu, 2),
        "BLEU with": round(corpus_scores(forced, ref, tgt_lang=tgt).bleu, 2),
        "seconds one line at a time, without": round(seconds["without"], 1),
        "seconds one line at a time, with": round(seconds["with"], 1),
    }


def confidence(translator, options, src, ref, fit) -> dict:
    """Spearman's correlation between the model's own confidence and the sentence chrF, and
    how far each value is from the chrF (0 to 1): the model's own and calibrated on the
    validation set (``fit``; monotone, so its Spearman is the same)."""
    from scipy.stats import spearmanr

    from aiayn.eval.calibration_fit import sentence_chrf

    found = [h[0] for h in translator.translate(src, options)]
    chrf = np.asarray(sentence_chrf([h.text for h in found], ref))
    raw = np.asarray([h.confidence for h in found])
    calibrated = np.asarray([fit.calibration(c) for c in raw])
    low = calibrated < 0.5
    return {
        "Spearman(confidence, sentence chrF)": round(float(spearmanr(raw, chrf).statistic), 3),
        "Spearman, calibrated": round(float(spearmanr(calibrated, chrf).statistic), 3),
        "mean sentence chrF (0-1)": round(float(chrf.mean()), 3),
        "mean confidence, own": round(float(raw.mean()), 3),
        "mean confidence, calibrated": round(float(calibrated.mean()), 3),
        "mean |confidence - chrF|, own": round(float(np.abs(raw - chrf).mean()), 3),
        "mean |confidence - chrF|, calibrated": round(float(np.abs(calibrated - chrf).mean()), 3),
        "lines calibrated below 0.5": int(low.sum()),
        "their mean chrF": round(float(chrf[low].mean()), 3) if low.any() else None,
    }


def calibration_fit(translator, options, args):
    """The calibration fitted on the validation set (``val.*.gz``), printed."""
    from aiayn.eval.calibration_fit import calibrate

    src = read(data_dir() / f"val.{args.src}.gz", args.limit)
    ref = read(data_dir() / f"val.{args.tgt}.gz", args.limit)
    fit = calibrate(translator.translate, src, ref, options, fitted_on="val")
    row = {
        "calibration on val": {
            "lines": fit.calibration.lines,
            "slope": round(fit.calibration.slope, 3),
            "intercept": round(fit.calibration.intercept, 3),
            "Spearman": round(fit.spearman, 3),
            "mean |confidence - chrF|, own": round(fit.gap_raw, 3),
            "mean |confidence - chrF|, calibrated": round(fit.gap_calibrated, 3),
        }
    }
    print(json.dumps(row, ensure_ascii=False, indent=1), flush=True)
    return fit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--sets", nargs="+", choices=["2016", "2017", "val"], default=["2016", "2017"]
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=["spans", "glossary", "confidence"],
        default=["spans", "glossary", "confidence"],
    )
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, help="the first N lines of each set")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from aiayn.translate.translator import SearchOptions, Translator

    translator = Translator.from_dir(args.model)
    translator.calibration = None  # the model's own confidence, calibrated here on val
    options = SearchOptions(beam=args.beam)
    fit = calibration_fit(translator, options, args) if "confidence" in args.parts else None
    for year in args.sets:
        name = set_name(year)
        src = read(data_dir() / f"{name}.{args.src}.gz", args.limit)
        ref = read(data_dir() / f"{name}.{args.tgt}.gz", args.limit)
        for part in args.parts:  # each printed as soon as it is measured
            if part == "confidence" and year == "val":
                continue  # calibrated on it: not a measurement
            if part == "spans":
                found = spans(translator, options, src, ref, args.seed)
            elif part == "glossary":
                found = glossary(translator, options, src, ref, args.seed, args.src, args.tgt)
            else:
                found = confidence(translator, options, src, ref, fit)
            row = {"set": name, "beam": args.beam, part: found}
            print(json.dumps(row, ensure_ascii=False, indent=1), flush=True)


if __name__ == "__main__":
    main()
