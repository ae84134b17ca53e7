"""The run's tables in the terminal, with rich (the same tables ``markdown.py`` writes)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable

from .tables import all_tables


def show(results: dict, console: Console) -> None:
    m = results["machine"]
    console.rule(f"odradek vs Tansu - {m['date']} - {m['cpu']}, {m['cores']} cores, "
                 f"{results['config']['mode']} run")
    for t in all_tables(results):
        table = RichTable(title=t.title, caption=t.note or None, title_justify="left")
        for i, h in enumerate(t.headers):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in t.rows:
            style = None
            if row and row[-1] in ("met", "not met"):
                style = "green" if row[-1] == "met" else "red"
            table.add_row(*row, style=style)
        console.print(table)
    for e in results.get("errors", []):
        console.print(f"[red]workload {e['workload']} failed: {e['error']}")
