"""Other tools' models in, aiayn models out: Hugging Face Marian (opus-mt) import, and
CTranslate2 export."""
