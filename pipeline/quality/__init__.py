"""Data-quality suites (great-expectations) over the step table and the splits."""
