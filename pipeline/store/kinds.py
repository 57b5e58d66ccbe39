"""The split kinds: the one home of their names (imported by modules that must not load pyarrow, such as the
glossary the sandbox worker reaches through the environment registry)."""

BENCHMARK, MIXTURE, CURRICULUM = "benchmark", "sft_mixture", "curriculum"
#: every split kind, in the order the DuckDB tables register them
SPLIT_KINDS = (BENCHMARK, MIXTURE, CURRICULUM)
