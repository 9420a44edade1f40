"""``aiayn serve``: LibreTranslate's API for translation models, the OpenAI-compatible
completions API for language models, batching across requests, and a web page."""
