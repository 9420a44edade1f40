"""Paragraphs cut into sentences and joined back with every character between them."""

import pytest

from aiayn.text import sentences, split_paragraph

TEXTS = [
    "A dog runs. A cat sleeps. Two men walk on the street. A woman sings.",
    "  Hello  there.   How are  you?\n\nFine, Mr. Smith. It costs 3.5 euros. \n",
    "Ein Hund rennt. Dr. Müller schläft.\r\nZwei Männer gehen.",
    "개가 달린다. 고양이가 잔다.\n두 남자가 걷는다.",
    "Um cão corre. O Sr. Silva dorme.",
    "",
    "   \n\n  ",
    "no final stop",
]


@pytest.mark.parametrize("text", TEXTS)
def test_joining_the_sentences_back_gives_the_text(text):
    paragraph = split_paragraph(text, "en")
    assert paragraph.join(list(paragraph.sentences)) == text
    assert len(paragraph.gaps) == len(paragraph.sentences) + 1
    assert all(s == s.strip() and s for s in paragraph.sentences)
    assert all(not gap.strip() for gap in paragraph.gaps)


@pytest.mark.parametrize(
    ("text", "lang", "sentences"),
    [
        (TEXTS[0], "en", 4),
        (TEXTS[1], "en", 4),  # "Mr." and "3.5" do not end a sentence
        (TEXTS[2], "de", 3),  # "Dr." neither
        (TEXTS[3], "ko", 3),  # no Korean rules: English ones
        (TEXTS[4], "pt", 2),
        (TEXTS[6], "en", 0),
    ],
)
def test_sentences_are_found(text, lang, sentences):
    assert len(split_paragraph(text, lang).sentences) == sentences


def test_without_splitting_only_line_breaks_cut():
    paragraph = split_paragraph(TEXTS[1], "en", split=False)
    assert paragraph.sentences == (
        "Hello  there.   How are  you?",
        "Fine, Mr. Smith. It costs 3.5 euros.",
    )


def test_joined_translations_keep_spacing_and_line_breaks():
    paragraph = split_paragraph("One. Two.\n\nThree.", "en")
    assert paragraph.join(["Eins.", "Zwei.", "Drei."]) == "Eins. Zwei.\n\nDrei."
    with pytest.raises(ValueError):
        paragraph.join(["Eins."])


LINES = [
    "A dog runs in the park.",
    "Two men play chess. One of them wins!",
    'He said "Go." Then he left.',
    "She asked: why? Nobody knew.",
    "Mr. Smith and Dr. Jones met at 5 p.m. Later they ate.",
    "It cost 3.50 euros . And more",
    "Wait... What happened?",
    "«Vite.» Il part.",
    "Er sagte: „Geh.“ Dann ging er.",
    "The U.S.A. is large. It has 50 states.",
    "Look (really.) There it is.",
    "no capital after. the stop",
    "ends with spaces.   ",
    "tab\tafter.\tNext",
    "한국어 문장입니다. 두 번째 문장입니다.",
    "这是第一句。这是第二句。",
    "Ein Hund läuft! Eine Katze schläft? Ja.",
    "Version 2.0 released.",
]


@pytest.mark.parametrize("lang", ["en", "de", "fr", "ko"])
def test_a_line_the_splitter_cannot_cut_skips_it_with_the_same_sentences(monkeypatch, lang):
    """``may_split``'s quick test gives every line the sentences the splitter itself gives."""
    assert sum(not sentences.may_split(line) for line in LINES) >= 5  # the quick path is taken
    quick = [split_paragraph(line, lang) for line in LINES]
    monkeypatch.setattr(sentences, "may_split", lambda line: bool(line.strip()))
    assert quick == [split_paragraph(line, lang) for line in LINES]
