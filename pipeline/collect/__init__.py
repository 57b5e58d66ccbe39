"""Trajectory collection strategies."""
