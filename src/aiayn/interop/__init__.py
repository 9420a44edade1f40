"""Other tools' models in, aiayn models out: Hugging Face Marian (opus-mt) import; CTranslate2,
Hugging Face Marian and Argos Translate exports."""
