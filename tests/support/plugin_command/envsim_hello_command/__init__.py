"""``./forge hello [NAME]``: a command added by a plugin package, one function and one entry point."""

import argparse

from cli.base import Command, data_root


def hello(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./forge hello", description="greet, naming the data root")
    parser.add_argument("name", nargs="?", default="world")
    args = parser.parse_args(argv)
    print(f"hello {args.name} from {data_root()}")
    return 0


HELLO = Command("hello", hello, "[NAME]   a plugin's command: greets, naming the data root")
