"""Environment sources behind one protocol (docs/definitions.md §3)."""
