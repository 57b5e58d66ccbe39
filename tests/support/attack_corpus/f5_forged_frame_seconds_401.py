from tests.support.attack_corpus._forger import CLASS, CODE  # noqa: F401 - the same forger, one variant per case

FAMILY = "F5"
DESCRIPTION = "Writes a forged step frame for its own call into its frame pipe (found via /proc/self/fd): call_seconds = a 401-digit integer."
ACTIONS = [("forge", {"index": 0, "variant": "seconds_401"}), ("forge", {"index": 1, "variant": "seconds_401"})]
