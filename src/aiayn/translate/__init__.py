"""Translation around the search: a model's ``Translator`` (text and ids, batches, the
stepper it keeps, the shortlist, spans and glossary terms, confidence and its calibration,
documents), language detection, and the one routing of several models that the CLI and the
server share (never imports train)."""
