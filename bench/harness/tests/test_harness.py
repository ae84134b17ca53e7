"""Checks of the harness's own logic (no broker, no timing): request frames against odradek's
codec, batch counting, the profile summary, alternation and medians, tables and the README
section. Run: ``.venv/bin/pytest bench/harness/tests -q``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pytest  # noqa: E402

from bench.harness import markdown, proc_stats, tables, wire  # noqa: E402
from bench.harness.comparison import Comparison, alternate  # noqa: E402
from bench.harness.config import parse_size_mib, preset  # noqa: E402
from bench.harness.kcat import records_file  # noqa: E402
from bench.harness.latency import stamp_template  # noqa: E402
from bench.harness.profiler import IN_LOOP, summarize  # noqa: E402
from bench.harness.raw_produce import batch_of_size, build_batch  # noqa: E402
from odradek.protocol import codec  # noqa: E402
from odradek.records.batch import set_base_offset, validate  # noqa: E402
from odradek.records.reader import read_batch  # noqa: E402


def test_produce_frame_is_a_produce_v9_request_with_the_batches():
    batch = build_batch(5, 100)
    frame = wire.produce_frame("t", {0: batch, 3: batch}, acks=-1, correlation_id=7)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, body = codec.decode_request(bytes(frame[4:]))
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (0, 9, 7)
    assert body.acks == -1
    (topic,) = body.topic_data
    assert topic.name == "t"
    assert [(p.index, bytes(p.records)) for p in topic.partition_data] == [(0, batch), (3, batch)]
    wire.set_correlation_id(frame, 123456)
    assert codec.decode_request(bytes(frame[4:]))[0].correlation_id == 123456


def test_fetch_frame_is_a_fetch_v12_request():
    frame = wire.fetch_frame("t", {2: 40}, 1 << 20, 1 << 16, max_wait_ms=100, min_bytes=1)
    header, body = codec.decode_request(bytes(frame[4:]))
    assert (header.request_api_key, header.request_api_version) == (1, 12)
    assert (body.max_bytes, body.min_bytes, body.max_wait_ms) == (1 << 20, 1, 100)
    (p,) = body.topics[0].partitions
    assert (p.partition, p.fetch_offset, p.partition_max_bytes) == (2, 40, 1 << 16)


def test_whole_batches_counts_records_and_ignores_a_cut_tail():
    a, b = bytearray(build_batch(3, 10)), bytearray(build_batch(4, 10))
    set_base_offset(a, 0, 10)
    set_base_offset(b, 0, 13)
    region = bytes(a + b)
    assert wire.whole_batches(region) == (2, 7, 17)
    assert wire.whole_batches(region[:-5]) == (1, 3, 13)
    assert wire.whole_batches(None) == (0, 0, -1)


def test_batch_of_size_fits_the_target():
    batch, n = batch_of_size(64 * 1024, 100)
    assert len(batch) <= 64 * 1024 and n > 500
    assert int.from_bytes(batch[57:61], "big") == n


def test_summarize_strips_the_loop_frames_and_counts_self_and_total():
    text = "\n".join([
        "process 1:\"python\";thread (0x1);main (odradek/cli/main.py);Runner.run (asyncio/runners.py);"
        "data_received (odradek/server/connection.py);append (odradek/storage/log.py) 3",
        "main (odradek/cli/main.py);Runner.run (asyncio/runners.py) 1",
    ])
    s = summarize(text)
    assert s["samples"] == 4
    assert s["self"][0] == ["append (storage/log.py)", 75.0]
    assert [IN_LOOP, 25.0] in s["self"]
    totals = dict((name, pct) for name, pct in s["total"])
    assert totals["data_received (server/connection.py)"] == 75.0
    assert "main (cli/main.py)" not in totals


class _B:
    def __init__(self, name):
        self.name = name
        self.pid = os.getpid()  # idle while alternate waits for it


def test_alternate_flips_the_order_and_reports_medians_and_ratio():
    order = []

    def run(broker, rep):
        order.append(broker.name)
        return {"throughput": {"odradek": 10.0, "tansu": 5.0}[broker.name] + rep}

    comp = alternate([_B("odradek"), _B("tansu")], 3, run, Comparison("k", "t", "c", "rec/s", "x"))
    assert order == ["odradek", "tansu", "tansu", "odradek", "odradek", "tansu"]
    assert comp.median("odradek", "throughput") == 11.0
    assert comp.ratio("throughput") == pytest.approx(11.0 / 6.0)
    assert all(r["settle_s"] >= 0 for runs in comp.runs.values() for r in runs)


def test_wait_until_idle_waits_for_a_busy_process(tmp_path):
    import subprocess
    import threading

    stop = tmp_path / "stop"
    spin = ("import os, sys, time\n"
            "while not os.path.exists(sys.argv[1]): pass\n"
            "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", spin, str(stop)])
    try:
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (proc_stats.wait_until_idle([child.pid]), done.set()))
        waiter.start()
        assert not done.wait(1.0)  # still spinning: still waiting
        stop.touch()
        assert done.wait(30)  # idle now: the wait ends
        waiter.join()
    finally:
        child.kill()
        child.wait()
    assert proc_stats.wait_until_idle([child.pid], timeout_s=30) < 30  # exited counts as idle: no timeout


def _results() -> dict:
    comp = Comparison("produce_100b_p1_acks1", "produce 100 B", "kcat", "rec/s", "CPU-s/M rec")
    for b, t, c in (("odradek", 800e3, 0.1), ("tansu", 600e3, 0.5)):
        comp.add(b, {"throughput": t, "cpu_per_unit": c, "wall_s": 1.0, "client_cpu_s": 0.9,
                     "noise_cpu_s": 0.2})
    return {"machine": {"date": "2026-01-01 00:00 UTC", "cpu": "cpu", "cores": 2, "memory_gib": 24,
                        "kernel": "6", "filesystem": "ext4", "python": "3.11", "odradek_commit": "abc",
                        "tansu": "tansu 0.6.0", "kcat": "1.7.1", "librdkafka (kcat)": "2.16.0",
                        "load_average_at_start": 0.5},
            "config": {"mode": "quick", "reps": 1}, "limits": {}, "profiles": {}, "errors": [],
            "comparisons": [comp.to_json()]}


def test_tables_and_targets_from_results():
    res = _results()
    by_title = {t.title.split(" (")[0]: t for t in tables.all_tables(res)}
    targets = by_title["Issue 8 targets"].rows
    assert ["produce 100 B (kcat): throughput >= Tansu", "1.33x", "met"] in targets
    assert ["produce 100 B (kcat): broker CPU/M rec <= 0.25x Tansu", "0.20x", "met"] in targets
    (row,) = by_title["Throughput and broker CPU"].rows
    assert row[2] == "800k rec/s" and row[4] == "1.33x" and row[-1] == "10%"
    assert "Machine limits" not in by_title  # not measured in this run


def test_update_readme_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{markdown.START}\nold\n{markdown.END}\noutro\n")
    text = markdown.section(_results())
    markdown.update_readme(readme, text)
    new = readme.read_text()
    assert new.startswith("intro\n") and new.endswith("outro\n")
    assert "old" not in new and "| produce 100 B | kcat | 800k rec/s |" in new


def test_sizes_presets_and_records_file(tmp_path):
    assert [parse_size_mib(x) for x in ("512M", "1G", "20GB", "64")] == [512, 1024, 20480, 64]
    assert preset(True).mode == "quick" and "profile" not in preset(True).workloads
    assert preset(False, reps=2).reps == 2
    path = records_file(tmp_path / "r.txt", 12_345, 100)
    assert path.stat().st_size == 12_345 * 101
    assert path.read_bytes()[:101] == b"0" * 100 + b"\n"


def test_proc_stats_of_this_process():
    assert proc_stats.cpu_seconds(os.getpid()) > 0
    assert proc_stats.cpu_seconds_ticks(os.getpid()) >= 0
    mem = proc_stats.memory_bytes(os.getpid())
    assert mem["rss"] > 0 and mem["hwm"] >= mem["rss"]
    assert proc_stats.system_busy_seconds() > 0
    assert 0 <= proc_stats.system_steal_seconds() <= proc_stats.system_busy_seconds()


def test_noise_names_the_steal_in_it_once_it_matters():
    res = _results()
    comp = res["comparisons"][0]
    by_title = lambda: {t.title.split(" (")[0]: t for t in tables.all_tables(res)}  # noqa: E731
    assert by_title()["Throughput and broker CPU"].rows[0][-1] == "10%"  # runs from before steal
    for runs in comp["runs"].values():
        for run in runs:
            run["steal_cpu_s"] = 0.01  # 0.5% of the machine: not named
    assert by_title()["Throughput and broker CPU"].rows[0][-1] == "10%"
    for runs in comp["runs"].values():
        for run in runs:
            run["steal_cpu_s"] = 0.16
    assert by_title()["Throughput and broker CPU"].rows[0][-1] == "10%, steal 8%"


def test_the_latency_stamp_lands_in_the_first_records_value():
    batch, at = stamp_template(4, 100)
    validate(batch)  # the CRC was updated after the marker went in
    values = [r.value for r in read_batch(bytes(batch)).records()]
    assert values[0][:8] == b"\xfe\xed\xfa\xce\xca\xfe\xbe\xef"
    assert values[1][:8] != values[0][:8] and values[1][8:] == values[0][8:]
    assert bytes(batch[at:at + 8]) == values[0][:8]


def test_summary_for_the_top_level_readme_only_where_marked(tmp_path):
    text = markdown.summary(_results())
    assert text.startswith("Latest results: 2026-01-01") and "**Issue 8 targets**" in text
    assert "Throughput and broker CPU" not in text  # the long tables stay in bench/README.md
    unmarked = tmp_path / "README.md"
    unmarked.write_text("intro\n")
    assert markdown.update_readme(unmarked, text, append_if_missing=False) is False
    assert unmarked.read_text() == "intro\n"
    marked = tmp_path / "MARKED.md"
    marked.write_text(f"a\n{markdown.START}\nold\n{markdown.END}\nb\n")
    assert markdown.update_readme(marked, text, append_if_missing=False) is True
    assert "**Issue 8 targets**" in marked.read_text() and "old" not in marked.read_text()


def test_kcat_env_puts_the_shim_first_and_preloads_only_when_asked(tmp_path, monkeypatch):
    from bench.harness.kcat import PRELOAD_ENV, kcat_env

    monkeypatch.delenv(PRELOAD_ENV, raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    env = kcat_env(tmp_path)
    assert env["LD_LIBRARY_PATH"] == str(tmp_path) and "LD_PRELOAD" not in env
    monkeypatch.setenv(PRELOAD_ENV, "/lib/libother-malloc.so")
    assert kcat_env(None)["LD_PRELOAD"] == "/lib/libother-malloc.so"


def test_a_broker_holding_records_in_memory_is_restarted_after_a_produce_run(tmp_path, monkeypatch):
    from bench.harness.brokers import TansuBroker
    from bench.harness.workloads.produce import forget_in_memory_data

    restarts = []
    tansu = TansuBroker(tmp_path / "tansu")
    monkeypatch.setattr(tansu, "restart", lambda: restarts.append("tansu"))
    forget_in_memory_data(tansu)
    forget_in_memory_data(object())  # odradek's records are on disk: nothing to forget
    assert restarts == ["tansu"]
