"""Simulators in the loop (DESIGN §9): closed-loop simulated rollouts with an executor shadow (Simia)."""
