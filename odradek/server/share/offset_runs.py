"""Small helpers over inclusive offset runs ``(first, last)`` kept sorted and disjoint."""

from __future__ import annotations

__all__ = ["run_list_add", "overlap_kind"]


def run_list_add(runs: list[tuple[int, int]], lo: int, hi: int) -> None:
    """Append ``[lo, hi]`` (at or after the last run), joining it to an adjacent last run."""
    if runs and runs[-1][1] + 1 == lo:
        runs[-1] = (runs[-1][0], hi)
    else:
        runs.append((lo, hi))


def overlap_kind(runs: list[tuple[int, int]], lo: int, hi: int) -> str:
    """How ``[lo, hi]`` meets the sorted disjoint ``runs``: "none", "all" (inside one run) or
    "some"."""
    for r_lo, r_hi in runs:
        if r_hi < lo:
            continue
        if r_lo > hi:
            break
        return "all" if r_lo <= lo and hi <= r_hi else "some"
    return "none"
