"""The web page's attention picture, drawn in a decoding process (``TranslationEngine.call``)
where the model already is: the server's own process holds no model."""

from __future__ import annotations

import io

from aiayn.translate.translator import Translator
from aiayn.viz import attention_figure, translation_attention
from aiayn.viz.figure import pyplot


def attention_png(translator: Translator, source: str, translation: str) -> bytes:
    """The encoder–decoder attention of ``translation`` of ``source``, every layer and head,
    drawn as ``aiayn plot attention`` draws it, as PNG."""
    src = translator.src_tokenizer.encode([source])[0]
    tgt = translator.tgt_tokenizer.encode([translation])[0]
    figure = attention_figure(translation_attention(translator, src, tgt), "cross")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    pyplot().close(figure)
    return buffer.getvalue()
