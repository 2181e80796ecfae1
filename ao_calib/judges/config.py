"""Schemas of the judges this package ships (each judge class names its own as ``config_class``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ao_calib.config import PluginConfig


@dataclass
class LiteLLMJudgeConfig(PluginConfig):
    """An LLM judge through litellm (any provider). API keys come from the provider's environment variable
    (e.g. OPENAI_API_KEY) and are never read from or written to configs."""

    model: str = "openai/gpt-4o-mini"
    api_base: Optional[str] = None  # an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1
    # A format string with {prompt}, {question} and {answer} ({label} too); null: the task's grading prompt.
    prompt: Optional[str] = None
    temperature: float = 0.0
    max_tokens: int = 256
    max_concurrency: int = 16
    # Provider rate limits; null: none. Requests are spaced evenly (a cap of N a minute starts one every 60/N s);
    # a request reserves its estimated tokens (prompt chars / 4 + max_tokens), corrected by the reply's usage.
    max_requests_per_minute: Optional[float] = None
    max_tokens_per_minute: Optional[float] = None
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 1.0  # first retry delay; doubles each retry
    jitter: float = 0.1  # each delay is stretched by up to this fraction, so retries do not arrive in step
    cache_dir: Optional[str] = "${paths.cache_dir}/judge"  # null: no disk cache


@dataclass
class LocalJudgeConfig(PluginConfig):
    """The base model itself (adapter disabled) as an offline judge."""

    prompt: Optional[str] = None  # null: the task's grading prompt
    max_new_tokens: int = 64
    batch_size: int = 8


def register_configs() -> None:
    """The shipped judges' schemas, for ``conf/judge/<name>.yaml`` to start from."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(group="judge", name="judge_schema", node=PluginConfig)
    cs.store(group="judge", name="litellm_schema", node=LiteLLMJudgeConfig)
    cs.store(group="judge", name="local_schema", node=LocalJudgeConfig)


register_configs()
