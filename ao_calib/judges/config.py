"""Schemas of the judges this package ships (each judge class names its own as ``config_class``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ao_calib.core.plugins import PluginConfig
from ao_calib.core.settings import above, at_least, setting


@dataclass
class LiteLLMJudgeConfig(PluginConfig):
    """An LLM judge through litellm (any provider). API keys come from the provider's environment variable
    (e.g. OPENAI_API_KEY) and are never read from or written to configs."""

    config_key = "judge"

    model: str = setting("openai/gpt-4o-mini", "litellm model name (provider/model).")
    api_base: Optional[str] = setting(None, "An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; null: the "
                                      "provider's own.")
    prompt: Optional[str] = setting(None, "A format string with {prompt}, {question} and {answer} ({label} too); "
                                    "null: the task's grading prompt.")
    temperature: float = setting(0.0, "The judge's sampling temperature.", allowed=at_least(0))
    max_tokens: int = setting(256, "Most tokens of each judgment.", allowed=at_least(1))
    max_concurrency: int = setting(16, "Requests in flight at once.", allowed=at_least(1))
    max_requests_per_minute: Optional[float] = setting(
        None, "Provider rate limit on requests; null: none. Requests are spaced evenly (a cap of N a minute starts "
        "one every 60/N s).", allowed=above(0))
    max_tokens_per_minute: Optional[float] = setting(
        None, "Provider rate limit on tokens; null: none. A request reserves its estimated tokens (prompt chars / 4 "
        "+ max_tokens), corrected by the reply's usage.", allowed=above(0))
    timeout_s: float = setting(30.0, "Seconds one request may take.", allowed=above(0))
    max_retries: int = setting(3, "Retries of a failed request before its judgment is masked.", allowed=at_least(0))
    backoff_s: float = setting(1.0, "First retry delay in seconds; doubles each retry.", allowed=at_least(0))
    jitter: float = setting(0.1, "Each delay is stretched by up to this fraction, so retries do not arrive in step.",
                            allowed=at_least(0))
    cache_dir: Optional[str] = setting("${paths.cache_dir}/judge", "Disk cache of judgments; null: no disk cache.")


@dataclass
class LocalJudgeConfig(PluginConfig):
    """The base model itself (adapter disabled) as an offline judge."""

    config_key = "judge"

    prompt: Optional[str] = setting(None, "A format string for the grading prompt; null: the task's grading "
                                    "prompt.")
    max_new_tokens: int = setting(64, "Most tokens of each judgment.", allowed=at_least(1))
    batch_size: int = setting(8, "Judgments generated at once.", allowed=at_least(1))


def register_configs() -> None:
    """The shipped judges' schemas, for ``conf/judge/<name>.yaml`` to start from (called by
    ``ao_calib.config.compose.register_schemas``)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(group="judge", name="judge_schema", node=PluginConfig)
    cs.store(group="judge", name="litellm_schema", node=LiteLLMJudgeConfig)
    cs.store(group="judge", name="local_schema", node=LocalJudgeConfig)

