from tests.support.attack_corpus._forger import CLASS, CODE  # noqa: F401 - the same forger, one variant per case

FAMILY = "F5"
DESCRIPTION = "Writes a forged step frame for its own call into its frame pipe (found via /proc/self/fd): turn = 10**30."
ACTIONS = [("forge", {"index": 0, "variant": "turn_huge"}), ("forge", {"index": 1, "variant": "turn_huge"})]
