"""Simulator evaluation: answer parsing (our and the reference answer format), FM / CM (exact),
cm_reference / fm_reference (the EnvSimBench evaluation code), cm_changed_paths, simulators, the async harness."""
