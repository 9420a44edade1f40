"""The preprocessing record: Multi30k's tok/ files reproduced from its raw files, outputs
restored to natural text."""

import gzip
from itertools import islice

import pytest

from aiayn.text import MOSES_LOWERCASED, NO_PREPROCESSING, Preprocessing, TextProcessor


def _lines(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in islice(f, n)]


@pytest.mark.parametrize("lang", ["en", "de", "fr"])
def test_moses_steps_reproduce_the_multi30k_tok_files(multi30k_dir, lang):
    """task1-tokenize.sh: normalize-punctuation, tokenizer -l LANG, lowercase; 300 lines of
    test2016 and of val, every one equal."""
    processor = TextProcessor(MOSES_LOWERCASED, lang)
    for split in ("test_2016_flickr", "val"):
        raw = _lines(multi30k_dir / f"{split}.{lang}.gz", 300)
        tok = _lines(multi30k_dir / "tok" / f"{split}.lc.norm.tok.{lang}.gz", 300)
        assert [processor.prepare(line) for line in raw] == tok


def test_restore_detokenises_unescapes_and_capitalises():
    de = TextProcessor(MOSES_LOWERCASED, "de")
    assert de.restore("ein mann &apos;s hut , &quot; hallo &quot; sagt er .") == (
        'Ein mann \'s hut, "hallo" sagt er.'
    )
    en = TextProcessor(MOSES_LOWERCASED, "en")
    assert en.restore("i think i &apos;m here , said bill .") == "I think I'm here, said bill."
    assert en.restore("") == "" and en.restore(". . .") == "..."


def test_no_preprocessing_passes_text_through():
    p = TextProcessor(NO_PREPROCESSING, "de")
    text = ' Ein Mann\'s "Hut" &amp; <b> . '
    assert p.prepare(text) == text.strip() and p.restore(text) == text


def test_prepare_then_restore_gives_natural_text_back_up_to_case():
    p = TextProcessor(MOSES_LOWERCASED, "en")
    text = 'A man, "Bob", says: it\'s 3.5 km & more [sic] | done.'
    assert p.prepare(text) == (  # English normalisation puts the comma inside the quotes
        "a man , &quot; bob , &quot; says : it &apos;s 3.5 km &amp; more &#91; sic &#93; "
        "&#124; done ."
    )
    assert p.restore(p.prepare(text)) == 'A man, "bob," says: it\'s 3.5 km & more [sic] | done.'


def test_a_record_holds_only_booleans():
    with pytest.raises(TypeError, match="lowercase must be true or false"):
        Preprocessing(lowercase="yes")
