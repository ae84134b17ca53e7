"""The README's performance section, generated from a run's JSON results.

``section(results)`` is Markdown: the date, the machine, the software versions, a note on
noise, and the same tables as the terminal. ``update_readme(path, text)`` puts it between the
``<!-- bench:results -->`` and ``<!-- /bench:results -->`` markers of ``bench/README.md``
(added at the end if missing), so the prose around it is kept. ``summary(results)`` is the
short form for the top-level README's Performance section (the header, the machine's limits
and the issue 8 targets), written between the same markers there only if they exist.
"""

from __future__ import annotations

from pathlib import Path

from .tables import Table, all_tables

START, END = "<!-- bench:results -->", "<!-- /bench:results -->"


def _table(t: Table) -> str:
    lines = [f"**{t.title}**", "", "| " + " | ".join(t.headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(t.headers))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in t.rows]
    if t.note:
        lines += ["", t.note]
    return "\n".join(lines)


def _head(results: dict) -> str:
    m, cfg = results["machine"], results["config"]
    return (f"Latest results: {m['date']}, `{cfg['mode']}` run of `bench/run.py`, odradek "
            f"{m['odradek_commit']}. Machine: {m['cpu']}, {m['cores']} cores, "
            f"{m['memory_gib']} GiB, Linux {m['kernel']}, {m['filesystem']}, Python {m['python']}. "
            f"Peer: {m['tansu']} (memory storage engine). C client: kcat {m['kcat']} on "
            f"librdkafka {m['librdkafka (kcat)']}. Load average at the start: "
            f"{m['load_average_at_start']:.2f}.")


def _errors(results: dict) -> list[str]:
    if not results.get("errors"):
        return []
    return ["Failed workloads: " + "; ".join(f"{e['workload']}: {e['error']}"
                                             for e in results["errors"])]


def section(results: dict) -> str:
    parts = [_head(results), *(_table(t) for t in all_tables(results))]
    return "\n\n".join(parts + _errors(results))


SUMMARY_TABLES = ("Machine limits", "Issue 8 targets")


def summary(results: dict) -> str:
    """The header, the machine's limits and the targets: what the top-level README shows."""
    kept = [t for t in all_tables(results) if t.title.startswith(SUMMARY_TABLES)]
    return "\n\n".join([_head(results), *(_table(t) for t in kept)] + _errors(results))


def update_readme(path: Path, text: str, append_if_missing: bool = True) -> bool:
    """Replace the marked block of ``path`` with ``text``; without markers append it (or,
    with ``append_if_missing=False``, leave the file alone). True if the file was written."""
    old = path.read_text() if path.exists() else ""
    if not append_if_missing and not (START in old and END in old):
        return False
    block = f"{START}\n{text}\n{END}"
    if START in old and END in old:
        before, rest = old.split(START, 1)
        after = rest.split(END, 1)[1]
        new = before + block + after
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new)
    return True
