"""The ``odradek`` command: one entry point, a subcommand per tool."""

from __future__ import annotations

import argparse
import sys

from odradek.cli import broker_cmd

COMMANDS = {
    "broker": broker_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="odradek: a Kafka-compatible distributed commit log")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command].run(args) or 0
    except KeyboardInterrupt:
        return 130
    except CliError as e:
        print(f"odradek {args.command}: {e}", file=sys.stderr)
        return 1


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


if __name__ == "__main__":
    sys.exit(main())
