from tests.support.attack_corpus._forger import CLASS, CODE  # noqa: F401 - the same forger, one variant per case

FAMILY = "F5"
DESCRIPTION = "Writes a forged step frame for its own call into its frame pipe (found via /proc/self/fd): a tool and arguments that were never called."
ACTIONS = [("forge", {"index": 0, "variant": "other_tool"}), ("forge", {"index": 1, "variant": "other_tool"})]
