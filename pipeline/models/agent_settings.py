"""The LLM agent's endpoint and limits (:class:`AgentSettings`) and its system prompt: what the collection
agent (:mod:`pipeline.collect.agent`) and the rollout agent (:mod:`pipeline.rollouts.loop`) share, kept here so
that neither stage imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.fields import setting

AGENT_SYSTEM_PROMPT = (
    "You are a careful assistant that completes the user's task by calling the available tools. "
    "Call tools when they help; answer without a tool call when the task is done."
)


@dataclass(frozen=True)
class AgentSettings:
    """An LLM agent solving tasks by function calling through an OpenAI-compatible endpoint."""

    model: str = setting("", "Model name; empty = the agent policy is skipped.")
    base_url: str | None = setting(None, "OpenAI-compatible endpoint (OpenAI, vLLM, LLaMA-Factory API).")
    api_key_env: str = setting("OPENAI_API_KEY", "Environment variable holding the API key.")
    temperature: float = setting(0.0, "Sampling temperature.")
    max_tokens: int = setting(1024, "Most tokens per model answer.")
    concurrency: int = setting(4, "Tasks run concurrently.")
    step_limit: int = setting(12, "Tool calls per episode before it is cut.")
    timeout_s: float = setting(120.0, "Timeout of one model request, seconds.")
    max_retries: int = setting(4, "Retries of a model request (429 / 5xx / timeouts / connection errors).")
