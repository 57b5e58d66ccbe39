"""Serving environments to agent-RL trainers: live sandboxed sessions, the OpenEnv protocol, in-process adapters."""
