"""Starting the child processes of a local cluster (ZooKeeper, brokers): output to a file,
no stdin, optionally killed with their parent and kept out of the terminal's Ctrl-C.

``die_with_parent`` sets ``PR_SET_PDEATHSIG`` (Linux's prctl 1) to SIGKILL in the forked child
before exec: the kernel kills the child when the *thread* that forked it ends, so a crashed or
kill -9'd test run or ``odradek cluster`` leaves no process behind. Start children from a
thread that lives as long as they should (the main thread). ``new_session`` puts the child in
a session of its own (``setsid``): Ctrl-C in the terminal then reaches only the parent, which
stops its children in order (brokers first, ZooKeeper last).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["popen_child"]

_PR_SET_PDEATHSIG = 1


def popen_child(args: list[str], output: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None,
                die_with_parent: bool = True, new_session: bool = False) -> subprocess.Popen:
    """Start ``args`` with stdout and stderr appended to ``output``; ``env`` is added to this
    process's environment."""
    output.parent.mkdir(parents=True, exist_ok=True)
    if die_with_parent and sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)  # loaded here, not between fork and exec
        preexec = lambda: libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # noqa: E731
    else:
        preexec = None
    with open(output, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env={**os.environ, **(env or {})}, preexec_fn=preexec,
                                start_new_session=new_session)
