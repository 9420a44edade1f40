"""Natural text around a model: the preprocessing a model was trained on (Moses steps),
applied to inputs and undone on outputs; paragraphs split into sentences; HTML; text in
runs of formatting; whole documents (``aiayn.text.documents``).

Pure text in, text out: no torch. Names are imported on first use (``aiayn.exports``).
"""

from aiayn.exports import lazy_exports

_SOURCES = {
    "MOSES_LOWERCASED": "aiayn.text.preprocessing",
    "NO_PREPROCESSING": "aiayn.text.preprocessing",
    "HtmlText": "aiayn.text.html",
    "Paragraph": "aiayn.text.sentences",
    "Preprocessing": "aiayn.text.preprocessing",
    "TextProcessor": "aiayn.text.preprocessing",
    "split_paragraph": "aiayn.text.sentences",
    "translate_html": "aiayn.text.html",
}
__all__ = list(_SOURCES)
__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
