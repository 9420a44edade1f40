"""Decoding: greedy search, batched beam search, and sampling."""

from aiayn.decode.greedy import greedy_decode

__all__ = ["greedy_decode"]
