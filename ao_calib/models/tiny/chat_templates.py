"""Jinja chat templates with the same shape as the real Qwen3 and Gemma 3 instruct templates.

Written for the tiny offline test models: prompts rendered with them have the same turn
markers, role names and generation prompt as the real checkpoints produce, so code that
builds prompts or slices completions behaves the same on tiny and real models. Features the
tests and trainers do not use (tool schemas, reasoning-content stripping, role-alternation
checks) are left out on purpose.
"""

from __future__ import annotations

# Both templates accept content as a plain string or as a list of {"type": "text", "text": ...}
# parts (joined), which is the form multimodal-style callers and TRL sometimes pass.

QWEN3_CHAT_TEMPLATE = r"""
{%- macro render_content(content) -%}
    {%- if content is none -%}
    {%- elif content is string -%}{{- content -}}
    {%- else -%}
        {%- for part in content -%}
            {%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- for message in messages -%}
    {{- '<|im_start|>' + message['role'] + '\n' + render_content(message['content']) + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
    {#- The real Qwen3 template turns thinking off by pre-filling an empty think block. -#}
    {%- if enable_thinking is defined and enable_thinking is false -%}
        {{- '<think>\n\n</think>\n\n' -}}
    {%- endif -%}
{%- endif -%}
""".strip()

GEMMA3_CHAT_TEMPLATE = r"""
{%- macro render_content(content) -%}
    {%- if content is none -%}
    {%- elif content is string -%}{{- content | trim -}}
    {%- else -%}
        {%- for part in content -%}
            {%- if part['type'] == 'image' -%}{{- '<start_of_image>' -}}
            {%- elif part['type'] == 'text' -%}{{- part['text'] | trim -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{#- Gemma has no system role: the system text is prepended to the first turn, then a blank line. -#}
{%- if messages and messages[0]['role'] == 'system' -%}
    {%- set first_prefix = render_content(messages[0]['content']) + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_prefix = '' -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
    {{- '<start_of_turn>' + role + '\n' + (first_prefix if loop.first else '') -}}
    {{- render_content(message['content']) + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<start_of_turn>model\n' -}}
{%- endif -%}
""".strip()

CHAT_TEMPLATES: dict[str, str] = {"qwen3": QWEN3_CHAT_TEMPLATE, "gemma3": GEMMA3_CHAT_TEMPLATE}
