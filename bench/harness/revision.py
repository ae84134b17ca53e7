"""A git revision of odradek as a source tree a broker can run from: a detached worktree with
its C extensions built in place.

``checkout(rev)`` resolves ``rev`` (``HEAD~3``, a branch, a sha) to a commit and returns
``bench/results/ab/<sha[:12]>``, a detached ``git worktree`` of this repository at that commit.
A worktree already there is reused: it is moved back to the commit if someone checked out
something else in it, and its C extensions are rebuilt only if ``setup.py build_ext`` finds
them out of date. ``bench/results/`` is git-ignored (checked before anything is created), so
the worktrees never show up in ``git status``; they stay until ``prune()`` removes them.

A broker runs from such a tree when its working directory and ``PYTHONPATH`` are the tree
(``python -m`` puts the working directory first on ``sys.path``, ahead of the venv's editable
install of /work/main); ``imported_from(tree)`` checks that a Python started that way imports
the tree's ``odradek`` and not the checkout's.

Contract: every function raises ``RevisionError`` with git's or the build's own message when a
step fails (an unknown revision, a failed compile), never leaves a half-made worktree
registered without its directory, and touches no worktree outside ``root``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "bench" / "results" / "ab"


class RevisionError(RuntimeError):
    pass


@dataclass(frozen=True)
class Tree:
    """Where a side of an A/B comparison runs from: ``sha`` is the commit (HEAD of the
    checkout for the working tree), ``dirty`` the checkout's uncommitted paths (none for a
    worktree: nothing edits it)."""

    label: str  # what the user asked for: "working tree", "HEAD~3", a sha
    path: Path
    sha: str
    dirty: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"label": self.label, "path": str(self.path), "sha": self.sha,
                "dirty": list(self.dirty)}


def git(*args: str, cwd: Path = REPO) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RevisionError(f"git {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.rstrip()  # not strip(): porcelain lines start with a space


def resolve(rev: str) -> str:
    """The full sha of the commit ``rev`` names in this repository."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except RevisionError:
        raise RevisionError(f"{rev!r} names no commit in {REPO}") from None


def working_tree() -> Tree:
    """This checkout as it is now, uncommitted changes included."""
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = tuple(line[3:] for line in status.splitlines() if line.strip())
    return Tree("working tree", REPO, git("rev-parse", "HEAD"), dirty)


def checkout(rev: str, root: Path = ROOT, build: bool = True) -> Tree:
    """The worktree of ``rev`` under ``root`` (made, or reused), built unless ``build`` is
    false."""
    sha = resolve(rev)
    root = Path(root).resolve()
    if root.is_relative_to(REPO) and subprocess.run(
            ["git", "check-ignore", "-q", str(root)], cwd=REPO).returncode != 0:
        raise RevisionError(f"{root} is not git-ignored: worktrees there would show in git status")
    root.mkdir(parents=True, exist_ok=True)
    path = root / sha[:12]
    if _head(path) is None:
        shutil.rmtree(path, ignore_errors=True)  # a leftover that is no worktree any more
        # --force: the path may still be registered from a worktree deleted by hand.
        git("worktree", "add", "--force", "--detach", str(path), sha)
    elif _head(path) != sha:
        git("checkout", "--detach", "--force", sha, cwd=path)
    if build:
        build_extensions(path)
    return Tree(rev, path, sha)


def _head(path: Path) -> str | None:
    """The commit checked out at ``path`` if it is a worktree of this repository, else None."""
    if not (path / ".git").is_file():
        return None
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def build_extensions(path: Path, python: str = sys.executable) -> None:
    """``setup.py build_ext --inplace`` in ``path`` with this venv's Python (revisions from
    before the C extensions have no setup.py and need no build)."""
    if not (path / "setup.py").exists():
        return
    out = subprocess.run([python, "setup.py", "-q", "build_ext", "--inplace"], cwd=path,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RevisionError(f"building the C extensions in {path} failed:\n{out.stderr[-3000:]}")


def stale_extensions(path: Path) -> list[str]:
    """C sources under ``path/odradek`` newer than their built module (or with none): a tree
    whose extensions were not rebuilt after an edit (the working tree is never built here)."""
    stale = []
    for source in sorted((path / "odradek").rglob("*.c")):
        built = list(source.parent.glob(source.stem + ".*.so"))
        if not built or max(b.stat().st_mtime for b in built) < source.stat().st_mtime:
            stale.append(str(source.relative_to(path)))
    return stale


def environment(tree: Path) -> dict[str, str]:
    """The environment a Python process runs ``tree``'s code in (with ``cwd=tree``)."""
    return dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")


def imported_from(tree: Path, python: str = sys.executable) -> Path:
    """The directory ``import odradek`` loads from in a Python started in ``tree``."""
    out = subprocess.run([python, "-c", "import odradek, os; print(os.path.dirname(odradek.__file__))"],
                         cwd=tree, env=environment(tree), capture_output=True, text=True)
    if out.returncode != 0:
        raise RevisionError(f"importing odradek in {tree} failed:\n{out.stderr[-2000:]}")
    return Path(out.stdout.strip())


def worktrees(root: Path = ROOT) -> list[Path]:
    """The registered worktrees of this repository under ``root`` (present or not)."""
    root = Path(root).resolve()
    found = []
    for line in git("worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):])
            if path.resolve().is_relative_to(root):
                found.append(path)
    return found


def remove(path: Path) -> None:
    """Unregister and delete one worktree made by ``checkout``."""
    git("worktree", "remove", "--force", str(path))
    shutil.rmtree(path, ignore_errors=True)


def prune(root: Path = ROOT) -> list[Path]:
    """Remove every worktree under ``root``; returns their paths."""
    removed = worktrees(root)
    for path in removed:
        remove(path)
    return removed
