from tests.support.attack_corpus._forger import CLASS, CODE  # noqa: F401 - the same forger, one variant per case

FAMILY = "F5"
DESCRIPTION = "Writes a forged step frame with turn = Infinity (JSON) for its own call into its frame pipe (found via /proc/self/fd)."
ACTIONS = [("forge", {"index": 0, "variant": "turn_inf"}), ("forge", {"index": 1, "variant": "turn_inf"})]
