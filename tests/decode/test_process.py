"""A Translator in its own process answers as the Translator does, warnings included."""

import pytest

from aiayn.translate.translator import SearchOptions, TranslationError, Translator
from aiayn.workers.translator_process import DecoderSpec, TranslatorProcess


def test_same_translations_and_warnings_as_in_process(trained_model_dir):
    lines = ["a b c d e f", "", "the dog runs"]
    options = SearchOptions(beam=3, nbest=2, max_src_len=4)
    here: list[str] = []
    expected = Translator.from_dir(trained_model_dir).translate(lines, options, warn=here.append)
    there: list[str] = []
    with TranslatorProcess(DecoderSpec(str(trained_model_dir))) as translator:
        found = translator.translate(lines, options, warn=there.append)
        with pytest.raises(TranslationError, match="more than --max-src-len"):
            translator.translate(lines, SearchOptions(max_src_len=4, on_long="error"))
        # other work on the process's model: a module-level function of (translator, *args)
        assert translator.call(getattr, "pretokenized") == expected_pretokenized(trained_model_dir)
        with pytest.raises(RuntimeError, match="AttributeError"):
            translator.call(getattr, "no_such_attribute")
        assert translator.translate(lines, options) == expected  # still serving
    assert found == expected
    assert there == here
    assert [w.split(":")[0] for w in here] == ["line 1", "line 3"]


def expected_pretokenized(model_dir) -> bool:
    return Translator.from_dir(model_dir).pretokenized


def test_an_error_in_the_with_block_ends_the_process_at_once(trained_model_dir):
    translator = TranslatorProcess(DecoderSpec(str(trained_model_dir)))
    with pytest.raises(KeyboardInterrupt), translator:
        raise KeyboardInterrupt
    assert not translator._process.is_alive()


SIGTERM_DURING_SET_UP = """
import signal, sys
import aiayn.memory
from aiayn.workers.translator_process import DecoderSpec, set_up_child
seen = []
aiayn.memory.limit_kernel_cache = lambda: seen.append(signal.getsignal(signal.SIGTERM))
set_up_child(DecoderSpec("m"), ends_by_sigterm=sys.argv[1] == "pool")
print(seen[0] == signal.SIG_DFL, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"""


@pytest.mark.parametrize(("kind", "ends"), [("pool", "True True"), ("server", "False False")])
def test_a_pool_process_ends_by_sigterm_even_while_it_sets_up(kind, ends):
    """A pool's process must die of SIGTERM while it still imports torch (the pool ends a
    process that has not finished starting, and would wait for it for ever); a server's
    decoding process ignores it throughout."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", SIGTERM_DURING_SET_UP, kind],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.split() == ends.split()


def test_an_abandoned_decode_is_stopped_and_the_process_serves_again(trained_model_dir):
    """Once nobody waits for a batch (every request timed out), its decode stops within
    about a second, the process is started again, and the next batch is answered."""
    import time

    from aiayn.workers.translator_process import RequestAbandoned

    # a batch no CPU decodes within the first check (1 s), abandoned from that check on:
    # distinct lines, so no two share a decode
    lines = [f"the dog number {i} runs in the park with {i % 97} balls" for i in range(20_000)]
    options = SearchOptions(beam=8, max_len_ratio=0.0, repeat_stop=0)
    with TranslatorProcess(DecoderSpec(str(trained_model_dir))) as translator:
        start = time.monotonic()
        with pytest.raises(RequestAbandoned):
            translator.translate(lines, options, abandoned=lambda: True)
        assert time.monotonic() - start < 20  # the model's reload included
        assert translator.restarts == 0  # asked for, not counted as a crash
        assert translator.translate(["the dog runs"], SearchOptions(beam=1))[0][0].text
