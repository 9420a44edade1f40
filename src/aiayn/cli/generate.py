"""``aiayn generate``: sample text from a language model, streamed as it is chosen."""

from __future__ import annotations

import argparse
import sys

from aiayn.cli.common import UsageError, integer, number


def add_parsers(sub) -> None:
    g = sub.add_parser("generate", help="sample text from a language model")
    g.add_argument("--model", required=True, help="language-model directory")
    g.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    g.add_argument("--max-new-tokens", type=integer(minimum=0), default=500)
    g.add_argument("--temperature", type=number(minimum=0.0), default=0.8, help="0: greedy")
    g.add_argument(
        "--top-k", type=integer(minimum=0), default=0, help="sample among the k likeliest (0: all)"
    )
    g.add_argument(
        "--top-p",
        type=number(minimum=0.0, maximum=1.0),
        default=1.0,
        help="nucleus sampling mass, in (0, 1] (1: off)",
    )
    g.add_argument(
        "--seed", type=integer(minimum=0, maximum=2**64 - 1), help="make the sample reproducible"
    )
    g.add_argument("--stop-at-eos", action="store_true", help="stop when the model emits EOS")
    g.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    g.add_argument(
        "--no-cache",
        action="store_true",
        help="re-run the whole context for each token (slow; for comparison)",
    )
    g.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from aiayn.decode import generate, load_language_model
    from aiayn.runtime import select_device

    if args.top_p == 0:
        raise UsageError("--top-p must be above 0 (1 switches nucleus sampling off)")
    device = select_device(args.device)
    model, tokenizer = load_language_model(args.model, device=str(device))
    prompt = tokenizer.encode([args.prompt])[0]
    if not prompt:
        raise UsageError("the prompt is empty after tokenisation")
    generator = torch.Generator(device).manual_seed(args.seed) if args.seed is not None else None
    produced: list[int] = []
    shown = ""

    def stream(token: int) -> None:
        nonlocal shown
        produced.append(token)
        text = tokenizer.decode(produced)
        sys.stdout.write(text[len(shown) :])
        sys.stdout.flush()
        shown = text

    sys.stdout.write(args.prompt)
    generate(
        model,
        prompt,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        generator=generator,
        stop_id=model.specials.eos if args.stop_at_eos else None,
        use_cache=not args.no_cache,
        on_token=stream,
    )
    sys.stdout.write("\n")
    return 0
