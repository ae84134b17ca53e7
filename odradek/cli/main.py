"""The ``odradek`` command: one entry point, a subcommand per tool."""

from __future__ import annotations

import argparse
import sys

from odradek.cli import (
    acls_cmd,
    broker_cmd,
    cluster_cmd,
    configs_cmd,
    console_cmd,
    consume_cmd,
    demo_cmd,
    dump_log_cmd,
    groups_cmd,
    leader_election_cmd,
    log_dirs_cmd,
    mirror_cmd,
    perf_cmd,
    produce_cmd,
    reassign_partitions_cmd,
    storage_cmd,
    topics_cmd,
    transactions_cmd,
)
from odradek.cli.common import CommandError as CliError  # one error type for every command

COMMANDS = {
    "broker": broker_cmd,
    "cluster": cluster_cmd,
    "demo": demo_cmd,
    "topics": topics_cmd,
    "produce": produce_cmd,
    "consume": consume_cmd,
    "groups": groups_cmd,
    "transactions": transactions_cmd,
    "configs": configs_cmd,
    "leader-election": leader_election_cmd,
    "reassign-partitions": reassign_partitions_cmd,
    "log-dirs": log_dirs_cmd,
    "acls": acls_cmd,
    "mirror": mirror_cmd,
    "dump-log": dump_log_cmd,
    "perf": perf_cmd,
    "storage": storage_cmd,
    "console": console_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="odradek: a Kafka-compatible distributed commit log")
    parser.add_argument("--version", action="version", version=f"odradek {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        module.add_parser(sub)
    parser.commands = sub.choices  # name -> the subcommand's parser
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("odradek")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Reported by the subcommand's own parser, whose usage is the one that helps.
        command = parser.commands.get(args.command, parser)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
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
