"""JSON tool calling (seed: tool_calling_sft_ppo.md): the model answers with one JSON object.

``{"final": ...}`` answers directly, ``{"tool": "calculator" | "python", "args": {...}}`` asks for a tool.
Modules: ``schema`` (row format), ``safe_eval`` (arithmetic without code execution), ``parsing`` (reading a
completion), ``rewards``, ``prompts``, ``data`` (loader), ``templates`` and ``create_dataset`` (generator).
"""
