"""Simulator evaluation: answer parsing, FM / CM / CM-lenient, the async harness."""
