"""Environment sources behind one protocol (DESIGN §3)."""
