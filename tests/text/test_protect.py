"""Protected spans: found, masked by sentinels, put back exactly once (no model needed)."""

import pytest

from aiayn.text.protect import MATCH_SECONDS, SENTINELS, ProtectError, compile_patterns, mask

BUILT_IN = compile_patterns(())


@pytest.mark.parametrize(
    "span",
    [
        "{{name}}",
        "{0}",
        "{}",
        "%s",
        "%d",
        "%(count)d",
        "%1$s",
        "%.2f",
        "$HOME",
        "${HOME}",
        "`ls -l`",
        "https://example.org/a?b=1&c=2",
        "www.example.com/path",
        "ftp://files.example.org/x.tar.gz",
        "first.last+tag@mail.example.co.uk",
    ],
)
def test_each_kind_of_span_is_masked_and_restored(span):
    sentence = f"Before {span} after."
    masked = mask(sentence, BUILT_IN)
    assert [s.text for s in masked.spans] == [span]
    assert span not in masked.text
    assert masked.restore(masked.text) == sentence


def test_trailing_punctuation_stays_out_of_a_url():
    masked = mask("See https://example.org/page. Or (www.example.com).", BUILT_IN)
    assert [s.text for s in masked.spans] == ["https://example.org/page", "www.example.com"]


def test_sentinels_avoid_the_words_a_sentence_holds():
    sentence = f"{' and '.join(SENTINELS[:2])} ask {{name}}"
    masked = mask(sentence, BUILT_IN)
    assert masked.spans[0].sentinel == SENTINELS[2]
    assert masked.restore(masked.text) == sentence


def test_a_sentinel_is_found_only_as_a_word_of_its_own():
    masked = mask("Ask {name}", BUILT_IN)
    sentinel = masked.spans[0].sentinel
    assert masked.restore(f"Frag {sentinel}x {sentinel}.") == f"Frag {sentinel}x {{name}}."


def test_many_spans_in_one_sentence_get_a_sentinel_each():
    sentence = " ".join(f"{{{n}}} and" for n in range(len(SENTINELS)))
    masked = mask(sentence, BUILT_IN)
    assert len({s.sentinel for s in masked.spans}) == len(SENTINELS)
    assert masked.restore(masked.text) == sentence
    with pytest.raises(ProtectError, match=f"more than {len(SENTINELS)} protected spans"):
        mask(sentence + " {x}", BUILT_IN)


@pytest.mark.parametrize(
    "sentence",
    [
        "A dog found %s%d bones in the park.",
        "Total: {count}{unit} for the dog.",
        "Hello {a}{b}, welcome.",
        "Run `make` `test` now.",
        "See {{x}} {{y}}  ${HOME} here.",  # spacing between them kept as it was
    ],
)
def test_spans_with_only_spacing_between_come_back_as_one_run_in_order(sentence):
    masked = mask(sentence, BUILT_IN)
    assert len(masked.spans) == 1
    (run,) = masked.spans
    dropped = " ".join(w for w in masked.text.split() if w.strip(",.") != run.sentinel)
    assert run.text in masked.restore(dropped)  # the model dropped the sentinel
    assert masked.restore(masked.text) == sentence


def test_dropped_spans_come_back_in_their_order_wherever_they_land():
    """30 placeholders between words, every sentinel dropped by the model: each comes back
    once, in the sentence's order (several landing between the same two words too)."""
    sentence = " ".join(f"{{p{i}}} w{i}" for i in range(30))
    masked = mask(sentence, BUILT_IN)
    sentinels = {s.sentinel for s in masked.spans}
    restored = masked.restore("w0 w1 w2.")  # a much shorter translation
    found = [w.rstrip(".") for w in restored.split() if w.startswith("{")]
    assert found == [f"{{p{i}}}" for i in range(30)]
    assert not sentinels & set(restored.split())


def test_restoring_puts_each_span_back_exactly_once_wherever_the_sentinel_went():
    masked = mask("Hello {{name}}, see %s", BUILT_IN)
    first, second = (s.sentinel for s in masked.spans)
    moved = f"{second} sehen, hallo {first}"
    assert masked.restore(moved) == "%s sehen, hallo {{name}}"
    assert masked.restore(f"hallo {first} {first}, {second}") == "hallo {{name}}, %s"
    assert masked.restore("hallo") == "hallo {{name}} %s"  # missing: where they stood


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("{x} A dog runs in the park.", "{x} Ein Hund läuft im Park."),
        ("A dog {x} runs in the park.", "Ein Hund {x} läuft im Park."),
        ("A dog runs in the park {x}.", "Ein Hund läuft im Park {x}."),
        ("A dog runs in the park: {x}", "Ein Hund läuft im Park {x}."),
        ("{x}", "{x} Ein Hund läuft im Park."),
    ],
)
def test_a_span_whose_sentinel_the_model_left_out_goes_where_it_stood(sentence, expected):
    masked = mask(sentence, BUILT_IN)
    assert masked.restore("Ein Hund läuft im Park.") == expected
    assert masked.restore("") == "{x}"


def test_a_span_touching_a_word_gets_its_sentinel_apart_and_its_place_back():
    masked = mask("Hi{name}!", BUILT_IN)
    assert masked.text.startswith("Hi ")
    assert masked.restore(masked.text.replace("Hi", "Hallo")) == "Hallo{name}!"


def test_user_patterns_join_the_built_in_ones():
    patterns = compile_patterns((r"ACME-\d+", r"\d+ ?kg"))
    masked = mask("Order ACME-42 weighs 12 kg", patterns)
    assert [s.text for s in masked.spans] == ["ACME-42", "12 kg"]


@pytest.mark.parametrize("text", ["a {{b c", "a {b c", "a b}} c", "a ${b c", "a %(b c"])
def test_an_unbalanced_placeholder_is_refused_in_one_line(text):
    with pytest.raises(ProtectError, match=r"line 3: unbalanced placeholder") as e:
        mask(text, BUILT_IN, place="line 3")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "", 5])
def test_a_pattern_that_does_not_compile_is_one_line(pattern):
    with pytest.raises(ProtectError, match="protect pattern") as e:
        compile_patterns((pattern,))
    assert "\n" not in str(e.value)


def test_a_runaway_pattern_is_stopped():
    patterns = compile_patterns((r"(a|aa)+$",))
    with pytest.raises(ProtectError, match=f"ran over {MATCH_SECONDS:g}s"):
        mask("a" * 40 + "!", patterns)


def test_plain_text_is_left_alone():
    sentence = "A dog runs 50% faster than $5 worth of cats."
    masked = mask(sentence, BUILT_IN)
    assert masked.text == sentence and not masked.spans


def test_the_patterns_of_one_call_share_a_time_budget():
    """Many patterns, each well under its own limit on each sentence, are stopped once the
    call's total is spent (a request cannot hold a decoder for minutes)."""
    import time

    from aiayn.text.protect import Deadline, compile_patterns

    slow = compile_patterns(tuple(["a*a*a*(?<!a)"] * 20))
    deadline = Deadline(0.2)
    start = time.perf_counter()
    with pytest.raises(ProtectError, match=r"ran over 0.2s in total"):
        for _ in range(200):
            mask("a" * 1400, slow, deadline=deadline)
    assert time.perf_counter() - start < 2
