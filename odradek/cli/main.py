"""The ``odradek`` command: one entry point, a subcommand per tool."""

from __future__ import annotations

import argparse
import sys

from odradek.cli import (
    broker_cmd,
    configs_cmd,
    consume_cmd,
    demo_cmd,
    dump_log_cmd,
    groups_cmd,
    perf_cmd,
    produce_cmd,
    topics_cmd,
)
from odradek.cli.common import CommandError as CliError  # one error type for every command

COMMANDS = {
    "broker": broker_cmd,
    "demo": demo_cmd,
    "topics": topics_cmd,
    "produce": produce_cmd,
    "consume": consume_cmd,
    "groups": groups_cmd,
    "configs": configs_cmd,
    "dump-log": dump_log_cmd,
    "perf": perf_cmd,
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


if __name__ == "__main__":
    sys.exit(main())
