"""Downloads with bounds: a server that accepts and never answers, or trickles, ends in one
line within a bounded time, and a file appears under its name only once it is whole.

Every socket operation (connecting, each read) waits at most ``STALL_S``; a download may also
be given a total time and a size it may not pass (a test set is a few megabytes: a server
sending more is not the one meant).
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from aiayn.data.corpus import CorpusError

STALL_S = 20.0  # seconds a connection or one read may wait for the server
CHUNK = 1 << 20


def download(
    url: str,
    target: Path,
    *,
    total_s: float | None = None,
    max_bytes: int | None = None,
    instead: str = "pass --from DIR with a local copy instead",
) -> None:
    """Write what ``url`` holds to ``target`` (through ``target.part``, renamed once whole;
    nothing is left at either name when the download fails).

    Raises:
        CorpusError: the server cannot be reached, stops answering for ``STALL_S``, takes
            longer than ``total_s`` in all, or sends more than ``max_bytes``; or the disk
            refused the write.
    """
    tmp = target.with_name(target.name + ".part")
    deadline = None if total_s is None else time.monotonic() + total_s
    try:
        with urllib.request.urlopen(url, timeout=STALL_S) as response, open(tmp, "wb") as f:
            size = 0
            read = getattr(response, "read1", response.read)  # what has come, not CHUNK
            while block := read(CHUNK):
                size += len(block)
                if max_bytes is not None and size > max_bytes:
                    raise _Refused(f"more than {max_bytes:,} bytes")
                if deadline is not None and time.monotonic() > deadline:
                    raise _Refused(f"not done within {total_s:g} s")
                f.write(block)
        os.replace(tmp, target)
    except (urllib.error.URLError, TimeoutError, OSError, ValueError, _Refused) as e:
        tmp.unlink(missing_ok=True)
        reason = f"no answer within {STALL_S:g} s" if isinstance(e, TimeoutError) else str(e)
        raise CorpusError(f"cannot download {url} ({reason}); {instead}") from None


class _Refused(Exception):
    """A download that went past its bounds."""
