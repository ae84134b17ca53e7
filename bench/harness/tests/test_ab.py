"""Checks of ``bench/ab.py`` and ``harness/revision.py``: worktrees at the right commit and
their reuse, the command line, medians and ratios from given numbers, and one real A/B of the
working tree against HEAD with tiny sizes (two brokers, kcat; no timing is asserted).
Run: ``.venv/bin/pytest -q bench/harness/tests -p no:cacheprovider``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pytest  # noqa: E402
from rich.console import Console  # noqa: E402

from bench import ab  # noqa: E402
from bench.harness import measure, revision  # noqa: E402
from bench.harness.brokers import REPO  # noqa: E402


def _head(path: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True,
                          text=True, check=True).stdout.strip()


def _registered() -> str:
    return revision.git("worktree", "list", "--porcelain")


def test_checkout_makes_a_worktree_at_the_revision_and_reuses_it(tmp_path):
    root = tmp_path / "ab"
    sha = revision.resolve("HEAD~1")
    try:
        tree = revision.checkout("HEAD~1", root, build=False)
        assert (tree.sha, tree.label, tree.path) == (sha, "HEAD~1", root.resolve() / sha[:12])
        assert _head(tree.path) == sha
        assert str(tree.path) in _registered()
        # Someone moves the worktree elsewhere; asking again puts it back, in the same place.
        (tree.path / "marker").write_text("kept")
        subprocess.run(["git", "checkout", "-q", "--detach", "HEAD~1"], cwd=tree.path, check=True)
        assert _head(tree.path) != sha
        again = revision.checkout(sha, root, build=False)
        assert again.path == tree.path and _head(again.path) == sha
        assert (again.path / "marker").read_text() == "kept"  # reused, not made anew
        assert revision.worktrees(root) == [tree.path]
    finally:
        removed = revision.prune(root)
    assert removed == [tree.path]
    assert not tree.path.exists() and str(tree.path) not in _registered()


def test_checkout_refuses_unknown_revisions_and_roots_git_would_track(tmp_path):
    with pytest.raises(revision.RevisionError, match="names no commit"):
        revision.checkout("no-such-revision-anywhere", tmp_path)
    tracked_root = REPO / "bench" / "ab-test-not-ignored"
    with pytest.raises(revision.RevisionError, match="not git-ignored"):
        revision.checkout("HEAD", tracked_root)
    assert not tracked_root.exists()


def test_the_working_tree_imports_its_own_odradek():
    tree = revision.working_tree()
    assert tree.path == REPO and tree.sha == revision.resolve("HEAD")
    assert revision.imported_from(REPO) == REPO / "odradek"


def test_arguments():
    args = ab.parse_args(["HEAD~3"])
    assert (args.rev, args.against, args.workloads, args.reps, args.records) == (
        "HEAD~3", None, ("produce", "consume", "bandwidth", "fetch"), 6, 1_000_000)
    args = ab.parse_args(["abc123", "--against", "HEAD", "--workloads", "consume, produce",
                          "--reps", "2", "--records", "2e4"])
    assert (args.rev, args.against, args.workloads, args.reps, args.records) == (
        "abc123", "HEAD", ("consume", "produce"), 2, 20_000)
    assert ab.parse_args(["HEAD", "--workloads", "produce8"]).workloads == ("produce8",)
    assert ab.parse_args(["--prune"]).prune
    assert ab.parse_args([]).rev == ab.BASELINE == "7c6971c"  # the CPU budget's baseline
    for bad in (["HEAD", "--workloads", "latency"], ["HEAD", "--reps", "0"],
                ["HEAD", "--prune"]):
        with pytest.raises(SystemExit):
            ab.parse_args(bad)


def _run(cpu, throughput, noise_cpu_s=0.0):
    return {"cpu_per_unit": cpu, "throughput": throughput, "wall_s": 2.0, "client_cpu_s": 1.0,
            "broker_cpu_s": 0.5, "noise_cpu_s": noise_cpu_s}


def test_summary_medians_ranges_and_ratio_b_over_a():
    runs = {"A": [_run(0.20, 900e3), _run(0.30, 700e3, 0.4), _run(0.25, 800e3)],
            "B": [_run(0.10, 1000e3, 2.0), _run(0.15, 1200e3), _run(0.40, 600e3)]}
    s = ab.summarize(runs, cores=2)
    a, b = s["sides"]["A"], s["sides"]["B"]
    assert a["cpu_per_unit"] == {"median": 0.25, "min": 0.20, "max": 0.30, "n": 3}
    assert b["cpu_per_unit"] == {"median": 0.15, "min": 0.10, "max": 0.40, "n": 3}
    assert a["throughput"]["median"] == 800e3 and b["throughput"]["median"] == 1000e3
    assert s["ratio"]["cpu_per_unit"] == pytest.approx(0.6)
    assert s["ratio"]["throughput"] == pytest.approx(1.25)
    assert a["client_busy"]["median"] == 0.5
    # noise: noise_cpu_s / wall_s / cores, over both sides' runs
    assert (s["noise"]["max"], s["noise"]["median"]) == (0.5, 0.0)
    assert a["noise"]["max"] == pytest.approx(0.1)
    assert ab.summarize({"A": runs["A"]}, cores=2)["ratio"]["cpu_per_unit"] is None


def test_table_shows_the_numbers():
    runs = {"A": [_run(0.20, 900e3)], "B": [_run(0.30, 450e3)]}
    results = {"config": {"reps": 1}, "workloads": {"produce": {
        "title": "produce 100 B", "unit": "rec/s", "cost_unit": "CPU-s/M rec",
        "summary": ab.summarize(runs, cores=2)}},
        "sides": {side: {"label": side, "sha": "f" * 40, "dirty": []} for side in ab.SIDES}}
    console = Console(record=True, width=200)
    console.print(ab.table(results))
    text = console.export_text()
    for cell in ("0.200", "0.300", "1.50x", "900k", "450k", "0.50x", "CPU-s/M rec"):
        assert cell in text


def test_budget_lines_say_whether_a_is_within_the_baselines_cpu():
    def results(b_sha):
        return {"sides": {"A": {"sha": "a" * 40}, "B": {"sha": b_sha}}, "workloads": {
            "produce": {"title": "produce 100 B", "cost_unit": "CPU-s/M rec",
                        "summary": ab.summarize({"A": [_run(0.080, 1e6)], "B": [_run(0.070, 1e6)]}, cores=2)},
            "consume": {"title": "consume 100 B", "cost_unit": "CPU-s/M rec",
                        "summary": ab.summarize({"A": [_run(0.040, 1e6)], "B": [_run(0.041, 1e6)]}, cores=2)},
            "bandwidth": {"title": "bandwidth", "cost_unit": "CPU-s/GB",
                          "summary": ab.summarize({"A": [_run(0.5, 1e9)]}, cores=2)}}}

    base = "b" * 40
    lines = ab.budget(results(base), base)
    assert len(lines) == 2  # bandwidth has no B runs: no line
    assert "produce 100 B: A uses 1.14x the baseline's CPU-s/M rec, over by 14%" in lines[0]
    assert "consume 100 B: A uses 0.98x the baseline's CPU-s/M rec, within" in lines[1]
    assert ab.budget(results("c" * 40), base) == []  # B is not the baseline


def test_stop_children_ends_a_client_left_running_and_spares_the_callers_own():
    own = subprocess.Popen(["sleep", "60"])  # e.g. a test session's Spark JVM
    try:
        spared = ab.children()
        assert own.pid in spared
        child = subprocess.Popen(["sleep", "60"])
        ab.stop_children(spared)
        assert child.poll() is not None or not os.path.exists(f"/proc/{child.pid}")
        assert own.poll() is None
    finally:
        own.kill()
        own.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_ab_of_the_working_tree_against_head_end_to_end(tmp_path, monkeypatch):
    """Two real brokers; produce is measured, then a second workload is interrupted as by
    Ctrl-C: the produce results survive, and the brokers and their data are gone."""
    seen = {}

    def interrupted(clients, brokers):
        seen.update({b.name: b.pid for b in brokers})
        raise KeyboardInterrupt

    monkeypatch.setitem(ab.RUNNERS, "consume", interrupted)
    monkeypatch.setattr(measure, "DROP_CACHES", tmp_path / "drop_caches")  # not the machine's
    # The worktree of HEAD goes under tmp_path and is removed at the end: at the real root,
    # every commit the test ran at would leave one behind.
    monkeypatch.setattr(revision, "ROOT", tmp_path / "ab")
    args = ab.parse_args(["HEAD", "--records", "20000", "--reps", "1",
                          "--workloads", "produce,consume"])
    # HEAD as the run resolves it, at its start: a commit made in the checkout while the run
    # goes on (another session's) moves HEAD but not the run's side B.
    head = revision.resolve("HEAD")
    try:
        results = ab.run_ab(args, Console(quiet=True), results_dir=tmp_path)
    finally:
        worktrees = revision.prune(revision.ROOT)
    assert len(worktrees) == 1
    assert results["sides"]["A"]["path"] == str(REPO)
    assert results["sides"]["B"]["path"] == str(revision.ROOT / head[:12])
    assert results["sides"]["B"]["sha"] == head
    produce = results["workloads"]["produce"]
    for side in ab.SIDES:
        (run,) = produce["runs"][side]
        assert run["records"] == 20_000 and run["broker_cpu_s"] > 0
    assert produce["summary"]["ratio"]["cpu_per_unit"] > 0
    assert results["budget"] == []  # B is HEAD, not the baseline
    assert [e["error"] for e in results["errors"]] == ["interrupted"]
    assert sorted(seen) == ["A", "B"] and not any(_alive(pid) for pid in seen.values())
    assert not list(revision.ROOT.glob(f"run-*-{os.getpid()}"))
    assert Path(results["path"]).parent == tmp_path and Path(results["path"]).exists()
    assert (tmp_path / "drop_caches").read_text() == "1"  # each produce run started on a dropped cache


def test_fresh_page_cache_drops_the_cache_and_reads_the_inputs_back(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "DROP_CACHES", tmp_path / "drop_caches")
    data = tmp_path / "records.txt"
    data.write_bytes(b"x" * 3_000_000)
    assert measure.fresh_page_cache(data)
    assert (tmp_path / "drop_caches").read_text() == "1"
    monkeypatch.setattr(measure, "DROP_CACHES", tmp_path / "absent" / "drop_caches")  # not root
    assert not measure.fresh_page_cache(data)
