"""The ``odradek`` command: one entry point, a subcommand per tool."""

from __future__ import annotations

import importlib
import sys

from odradek.cli.command_parser import CommandParser
from odradek.cli.common import CommandError as CliError  # one error type for every command

# A subcommand's module is imported only when needed: ``odradek topics ...`` loads the topics
# tool alone (its parser and its run), and ``odradek --version`` none of them, so that a command
# does not pay for the imports of the broker, Spark and the others (bench/cli_startup.py).
COMMANDS = {
    "broker": "broker_cmd",
    "cluster": "cluster_cmd",
    "demo": "demo_cmd",
    "topics": "topics_cmd",
    "produce": "produce_cmd",
    "consume": "consume_cmd",
    "groups": "groups_cmd",
    "share-groups": "share_groups_cmd",
    "transactions": "transactions_cmd",
    "configs": "configs_cmd",
    "leader-election": "leader_election_cmd",
    "reassign-partitions": "reassign_partitions_cmd",
    "log-dirs": "log_dirs_cmd",
    "acls": "acls_cmd",
    "mirror": "mirror_cmd",
    "dump-log": "dump_log_cmd",
    "perf": "perf_cmd",
    "storage": "storage_cmd",
    "console": "console_cmd",
}


def command_module(name: str):
    """The module of subcommand ``name`` (its ``add_parser`` and ``run``)."""
    return importlib.import_module(f"odradek.cli.{COMMANDS[name]}")


def build_parser(commands=COMMANDS) -> CommandParser:
    """The ``odradek`` parser with the subcommands ``commands`` (by default all of them)."""
    # CommandParser: --version on every command, usage errors in two lines (command_parser.py).
    parser = CommandParser(prog="odradek", description="odradek: a Kafka-compatible distributed commit log")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        command_module(name).add_parser(sub)
    parser.commands = sub.choices  # name -> the subcommand's parser
    return parser


def _needed(argv: list[str]):
    """The subcommands the parser needs for ``argv``: the one named (the first word that is not
    an option: the top level's only options, ``--version`` and ``--help``, take no value), none
    for a lone ``--version``, else all (``--help``, no command, an unknown one: the list of
    commands, or argparse's "invalid choice", names them all)."""
    words = [a for a in argv if not a.startswith("-")]
    if words:
        return (words[0],) if words[0] in COMMANDS else COMMANDS
    return () if "--version" in argv and not {"-h", "--help"} & set(argv) else COMMANDS


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_needed(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Reported by the (innermost) subcommand's own parser, whose usage is the one that helps.
        parser.innermost(args).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return command_module(args.command).run(args) or 0
    except KeyboardInterrupt:
        return 130
    except CliError as e:
        print(f"odradek {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
