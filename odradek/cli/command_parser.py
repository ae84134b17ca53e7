"""The parser of every ``odradek`` command line: argparse's, with two habits of Kafka's tools.

``--version`` on every command and subcommand (``odradek topics --version``), printing
``odradek <version>`` on standard output and exiting 0, as ``kafka-topics.sh --version`` prints
its version. The version is looked up only then (``importlib.metadata`` reads the installed
distributions: not a cost every run should pay).

A usage error prints two lines on standard error, then exits with status 2::

    usage: odradek topics (--create | --list | --describe | --alter | --delete) [options]
    odradek topics: error: unrecognized arguments: --bogus

argparse's own usage lists every option, wrapped over a screenful on a narrow terminal, above
the one line that says what is wrong; here the usage is one line: the options the command
requires (a required choice in parentheses), ``[options]`` for the rest, then the positional
arguments. ``--help`` still prints the full usage and every option.

Subparsers inherit the class (argparse's ``add_subparsers`` makes its parsers of the parent's
type), so every subcommand, and ``odradek perf produce``, behaves the same.
"""

from __future__ import annotations

import argparse
import sys


def odradek_version() -> str:
    """The installed distribution's version, or ``(not installed)`` in a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("odradek")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


class _PrintVersion(argparse.Action):
    """``--version``: print ``odradek <version>`` on standard output and exit 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"odradek {odradek_version()}\n")
        sys.stdout.flush()
        parser.exit()


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser with ``--version`` and a one-line usage (see the module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action=_PrintVersion, help="print odradek's version and exit")

    def format_usage(self) -> str:
        """``usage: PROG REQUIRED [options] POSITIONALS``, one line whatever the terminal's width."""
        in_required_group = {a for g in self._mutually_exclusive_groups if g.required for a in g._group_actions}
        required = [a for a in self._actions
                    if a.option_strings and (a.required or a in in_required_group)]
        positionals = [a for a in self._actions if not a.option_strings]
        parts = [self.prog, self._usage_of(required), "[options]", self._usage_of(positionals)]
        return "usage: " + " ".join(p for p in parts if p) + "\n"

    def innermost(self, args: argparse.Namespace) -> CommandParser:
        """The parser of the deepest subcommand ``args`` chose (``odradek perf produce``'s for
        ``odradek perf produce ...``): the one whose usage helps with an error in its options."""
        parser = self
        while True:
            subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(args, subs.dest, None) if subs is not None else None
            if chosen not in getattr(subs, "choices", {}):
                return parser
            parser = subs.choices[chosen]

    def _usage_of(self, actions) -> str:
        """argparse's usage text of ``actions`` alone (groups kept), without the program name."""
        if not actions:
            return ""
        groups = [g for g in self._mutually_exclusive_groups if set(g._group_actions) <= set(actions)]
        formatter = argparse.HelpFormatter(self.prog, width=1_000_000)
        formatter.add_usage(None, actions, groups, prefix="")
        return formatter.format_help().strip()[len(self.prog):].strip()
