"""Tiny random-initialised models of the real architecture classes (Qwen3, Gemma 3) with a locally trained
tokenizer and chat templates of the real shape, for tests and offline runs (``models``, ``corpus``,
``chat_templates``)."""
