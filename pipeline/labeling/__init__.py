"""Executor labeling: outcome, arguments, and step records."""
