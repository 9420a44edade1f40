"""HTML like LibreTranslate's format "html": Mastodon-like snippets through a stand-in
translation (upper case, or a word count), so the rule itself is what is checked."""

import pytest

from aiayn.text import HtmlText, translate_html

MENTION = (
    '<span class="h-card" translate="no"><a href="https://m.social/@alice" '
    'class="u-url mention">@<span>alice</span></a></span>'
)
HASHTAG = (
    '<a href="https://m.social/tags/dogs" class="mention hashtag" rel="tag">#<span>dogs</span></a>'
)
LINK = (
    '<a href="https://example.org/a/long/path" rel="nofollow noopener" target="_blank">'
    '<span class="invisible">https://</span><span class="ellipsis">example.org/a/long</span>'
    '<span class="invisible">/path</span></a>'
)


def _upper(texts):
    return [t.upper() for t in texts]


def test_a_sentence_across_inline_tags_is_one_segment():
    document = HtmlText("<p>A dog <b>runs on</b> the <a href='/x'>green grass</a>. It sleeps.</p>")
    assert document.texts == ["A dog runs on the green grass. It sleeps."]


def test_mastodon_post_keeps_mentions_hashtags_links_and_line_breaks():
    html = (
        f"<p>{MENTION} A dog runs on the grass &amp; a cat sleeps.<br>Two men walk.<br/>"
        f"{HASHTAG} {LINK}</p><p>.</p><p>&lt;3 &quot;ok&quot;</p>"
    )
    document = HtmlText(html)
    assert document.texts == ["A dog runs on the grass & a cat sleeps.", "Two men walk.", '<3 "ok"']
    out = document.render(_upper(document.texts))
    assert out.count("<br/>") == 2
    assert MENTION.replace(' translate="no"', "") not in out  # attributes may be reordered
    for kept in ("@<span>alice</span>", "#<span>dogs</span>", "example.org/a/long", "<p>.</p>"):
        assert kept in out
    assert " A DOG RUNS ON THE GRASS &amp; A CAT SLEEPS.<br/>TWO MEN WALK.<br/>" in out
    assert '<p>&lt;3 "OK"</p>' in out  # escaped once, never twice
    assert "&amp;amp;" not in out and "&amp;lt;" not in out


def test_markup_and_punctuation_only_are_left_alone():
    html = "<div><p> . </p><p>!?</p><img src='x.png'><p></p></div>"
    calls = []
    out = translate_html(html, lambda texts: calls.append(texts) or texts)
    assert calls == [] and out == _round_trip(html)


def _round_trip(html):  # what parsing and writing alone give
    return HtmlText(html).render([])


def test_inline_tags_carry_the_words_at_their_place():
    """Words are dealt to the text nodes in proportion to their source words."""
    out = translate_html(
        "<p>one two <b>three four</b> five six</p>",
        lambda texts: ["a b c d e f"],
    )
    assert out == "<p>a b <b>c d</b> e f</p>"  # each space on its side, as in the source
    out = translate_html(
        "<p><a href='/u'>Alice</a> sleeps now.</p>", lambda t: ["Alice schläft jetzt."]
    )
    assert out == '<p><a href="/u">Alice</a> schläft jetzt.</p>'


def test_every_tag_with_text_gets_a_word_while_words_last():
    out = translate_html("<p><i>a</i> <b>b</b> <u>c</u></p>", lambda t: ["x y z"])
    assert out == "<p><i>x</i> <b>y</b> <u>z</u></p>"


@pytest.mark.parametrize("count", [0, 2])
def test_a_wrong_number_of_translations_is_refused(count):
    document = HtmlText("<p>One.</p><p>Two.</p><p>Three.</p>")
    with pytest.raises(ValueError, match="3 segments"):
        document.render(["x"] * count)


def test_punctuation_in_its_own_node_is_translated_with_its_sentence():
    texts = []
    out = translate_html(
        "<p>A dog <b>runs</b>.</p>", lambda t: texts.extend(t) or ["Ein Hund rennt."]
    )
    assert texts == ["A dog runs."]
    assert out == "<p>Ein Hund <b>rennt.</b></p>"


def test_mixed_case_names_keep_the_source_s_spelling():
    """SVG and MathML in XHTML are case-sensitive: ``viewBox`` and ``<linearGradient>`` come
    back spelled as they were; a word in the text is no name."""
    source = (
        '<p>The P value</p><svg viewBox="0 0 10 10" preserveAspectRatio="none">'
        '<linearGradient gradientUnits="userSpaceOnUse"></linearGradient></svg>'
    )
    page = HtmlText(source)
    out = page.render(page.texts)
    for name in ("viewBox=", "preserveAspectRatio=", "<linearGradient", "gradientUnits="):
        assert name in out
    assert "<p>" in out and "<P>" not in out
