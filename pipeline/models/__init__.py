"""Asking a model (engine tier): the one client of an OpenAI-compatible endpoint (``openai_client``) and the
function-calling agent that acts in an environment through the sandbox (``agent``), shared by collection
and rollouts."""
