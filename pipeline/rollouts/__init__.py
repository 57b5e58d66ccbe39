"""Simulators in the loop (docs/definitions.md §9): closed-loop simulated rollouts with an executor shadow (Simia)."""
