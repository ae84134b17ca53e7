"""The tables of a run, built from its JSON results (``results.py``): one list of
``Table(title, headers, rows)`` that both the terminal (``report.py``, rich) and the README
(``markdown.py``) render, so the two always show the same numbers.

Every throughput table puts odradek and Tansu side by side with the ratio odradek/Tansu of the
medians; ``noise`` is the CPU that other processes on the machine used during the runs, as a
share of the machine's cores (0% on a quiet machine).
"""

from __future__ import annotations

from dataclasses import dataclass

from .measure import noise_share, steal_share

O, P = "odradek", "tansu"


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


def _num(x, unit: str = "") -> str:
    if x is None:
        return "-"
    if unit == "rec/s":
        return f"{x / 1e3:,.0f}k"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _med(c: dict, broker: str, metric: str):
    return c["median"].get(broker, {}).get(metric)


def _noise(c: dict, cores: int, broker: str | None = None) -> str:
    """Median noise over the runs, and the median steal when that reached 1%."""
    runs = [r for b, rs in c["runs"].items() for r in rs if r.get("wall_s") and broker in (None, b)]
    if not runs:
        return "-"
    shares = sorted(noise_share(r, cores) for r in runs)
    text = f"{100 * shares[len(shares) // 2]:.0f}%"
    steals = sorted(s for s in (steal_share(r, cores) for r in runs) if s is not None)
    if steals and steals[len(steals) // 2] >= 0.01:
        text += f", steal {100 * steals[len(steals) // 2]:.0f}%"
    return text


def _client_busy(c: dict, broker: str) -> str:
    shares = sorted(r["client_cpu_s"] / r["wall_s"] for r in c["runs"].get(broker, []) if r.get("wall_s"))
    return f"{100 * shares[len(shares) // 2]:.0f}%" if shares else "-"


def limits_table(res: dict) -> Table:
    lim = res.get("limits") or {}
    fs = lim.get("fdatasync_4k", {})
    rows = [["loopback TCP (sendall -> recv_into, 1 MiB)", f"{lim.get('loopback_tcp_gbps', 0):.2f} GB/s"],
            ["sendfile from page cache to loopback", f"{lim.get('sendfile_loopback_gbps', 0):.2f} GB/s"],
            ["page-cache write (os.write 1 MiB)", f"{lim.get('page_cache_write_gbps', 0):.2f} GB/s"],
            ["4 KiB append + fdatasync",
             f"p50 {fs.get('p50_ms', 0):.2f} ms, p99 {fs.get('p99_ms', 0):.2f} ms"]]
    return Table("Machine limits (same run)", ["what", "measured"], rows)


def throughput_table(res: dict) -> Table:
    cores = res["machine"]["cores"]
    rows = []
    for c in res["comparisons"]:
        if c["kind"] != "throughput":
            continue
        rows.append([c["title"], c["client"],
                     f"{_num(_med(c, O, 'throughput'), c['unit'])} {c['unit']}",
                     f"{_num(_med(c, P, 'throughput'), c['unit'])}", _ratio(c["ratio"].get("throughput")),
                     f"{_num(_med(c, O, 'cpu_per_unit'))} {c['cost_unit']}",
                     _num(_med(c, P, "cpu_per_unit")), _ratio(c["ratio"].get("cpu_per_unit")),
                     f"{_client_busy(c, O)} / {_client_busy(c, P)}", _noise(c, cores)])
    return Table(f"Throughput and broker CPU (medians of {res['config']['reps']} alternating runs)",
                 ["workload", "client", "odradek", "tansu", "o/t", "odradek CPU", "tansu CPU",
                  "o/t", "client busy o / t", "noise"], rows,
                 "client busy: the client's CPU time over the run's wall time (100% = one core "
                 "saturated: the client, not the broker, set the pace). noise: CPU used by other "
                 "processes, as a share of the machine; steal: time the hypervisor gave to other "
                 "virtual machines meanwhile, which slows every figure of a run, the peer's too.")


def latency_table(res: dict) -> Table:
    max_rate = _max_produce_rate(res)
    cores = res["machine"]["cores"]
    rows = []
    for c in res["comparisons"]:
        if c["kind"] != "latency":
            continue
        for b in (O, P):
            if b not in c["median"]:
                continue
            offered = _med(c, b, "offered_records_per_s")
            share = f"{100 * offered / max_rate:.0f}%" if max_rate and offered else "-"
            rows.append([f"{offered:,.0f}", share, b, _num(_med(c, b, "throughput"), "rec/s"),
                         *(f"{_med(c, b, k):.2f}" for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")),
                         _num(_med(c, b, "cpu_per_unit")), _noise(c, cores, b)])
    return Table("End-to-end latency at fixed rates (100 B records, ms)",
                 ["offered rec/s", "of max", "broker", "achieved", "p50", "p99", "p99.9", "max",
                  "CPU-s/M rec", "noise"], rows,
                 "'of max': the rate as a share of odradek's median kcat produce rate (1 partition, acks=1).")


def partitions_table(res: dict) -> Table:
    rows = []
    for c in res["comparisons"]:
        if c["kind"] != "partitions":
            continue
        for b in (O, P):
            if b not in c["median"]:
                continue
            g = lambda k: _med(c, b, k)  # noqa: E731
            rows.append([c["key"].split("_")[1], b, _num(g("create_s")), _num(g("throughput"), "rec/s"),
                         _num(g("cpu_per_unit")), _num(g("rss_mb_idle")), _num(g("rss_mb_created")),
                         _num(g("rss_mb_written")), _num(g("stop_s")), _num(g("start_s")),
                         _num(g("serve_s"))])
    return Table("Partitions on one broker", ["partitions", "broker", "create s", "produce rec/s",
                 "CPU-s/M rec", "RSS idle MB", "RSS created MB", "RSS written MB", "clean stop s",
                 "start: ready s", "start: serving s"], rows,
                 "start: from launching the process to printing ready / to the first acknowledged "
                 "produce on the last partition. Tansu (memory engine) loses its topics on restart: "
                 "no restart figures.")


def log_size_table(res: dict) -> Table:
    rows = []
    for c in res["comparisons"]:
        if c["kind"] != "log_size":
            continue
        for b in (O, P):
            if b not in c["median"]:
                continue
            g = lambda k: _med(c, b, k)  # noqa: E731
            rows.append([f"{g('log_mib'):,.0f}", b, _num(g("throughput")), _num(g("cpu_per_unit")),
                         _num(g("read_p50_ms")), _num(g("read_p99_ms")), _num(g("read_cpu_ms"))])
    return Table("Log size: append at the end and random reads (64 KiB batches)",
                 ["log MiB", "broker", "append GB/s", "CPU-s/GB", "read p50 ms", "read p99 ms",
                  "broker CPU ms/read"], rows)


def _max_produce_rate(res: dict):
    for c in res["comparisons"]:
        if c["key"] == "produce_100b_p1_acks1":
            return _med(c, O, "throughput")
    return None


def _find(res: dict, key: str) -> dict | None:
    return next((c for c in res["comparisons"] if c["key"] == key), None)


def targets_table(res: dict) -> Table:
    """Issue 8's targets, each with the figure this run measured and whether it is met."""
    rows = []

    def add(target: str, measured: str, ok):
        rows.append([target, measured, "not measured" if ok is None else ("met" if ok else "not met")])

    for key, what, cpu_limit in (("produce_100b_p1_acks1", "produce 100 B (kcat)", 0.25),
                                 ("consume_100b", "consume 100 B (kcat)", 0.5)):
        c = _find(res, key)
        if c:
            r, cr = c["ratio"].get("throughput"), c["ratio"].get("cpu_per_unit")
            add(f"{what}: throughput >= Tansu", _ratio(r), None if r is None else r >= 1)
            add(f"{what}: broker CPU/M rec <= {cpu_limit}x Tansu", _ratio(cr),
                None if cr is None else cr <= cpu_limit)
    for key, what, goal in (("produce_1mib_batches", "raw produce 1 MiB batches", 1.0),
                            ("consume_1mib_batches", "raw consume", 1.2)):
        c = _find(res, key)
        if c:
            v = _med(c, O, "throughput")
            add(f"{what} >= {goal} GB/s", f"{v:.2f} GB/s", v >= goal)
    max_rate = _max_produce_rate(res)
    lats = [c for c in res["comparisons"] if c["kind"] == "latency" and O in c["median"]]
    if max_rate and lats:
        c = min(lats, key=lambda c: abs(_med(c, O, "offered_records_per_s") - max_rate / 2))
        v, rate = _med(c, O, "p99_ms"), _med(c, O, "offered_records_per_s")
        near = abs(rate - max_rate / 2) <= 0.3 * max_rate / 2  # else the rate was not measured
        add(f"end-to-end p99 <= 5 ms at half max ({max_rate / 2e3:,.0f}k rec/s)",
            f"{v:.2f} ms at {rate / 1e3:,.0f}k rec/s", (v <= 5) if near else None)
    gcs = [c for c in res["comparisons"] if c["key"].startswith("group_commit") and O in c["median"]]
    if gcs:
        best = max(gcs, key=lambda c: _med(c, O, "throughput"))
        v = _med(best, O, "throughput")
        syncs, requests = _med(best, O, "broker_syncs"), _med(best, O, "requests")
        window = int(best["client"].rsplit(" ", 1)[-1])
        # At most `window` requests are in flight, so a broker that flushes before it acks
        # cannot fold more than `window` batches into one flush.
        durable = None if syncs is None else syncs >= requests / window
        add("acks=all, flush per batch >= 100 MB/s",
            f"{v:,.0f} MB/s ({best['title'].split(', ')[-1]}); broker fsyncs: "
            f"{'?' if syncs is None else f'{syncs:.0f}'} for {requests:.0f} batches",
            None if durable is None else v >= 100 and durable)
    c = _find(res, "partitions_10000")
    if c and O in c["median"]:
        rss, serve = _med(c, O, "rss_mb_written"), _med(c, O, "serve_s")
        add("10,000 partitions: memory <= 1 GB", f"{rss:,.0f} MB", rss <= 1000)
        add("10,000 partitions: restart <= 5 s", f"{serve:.1f} s", serve <= 5)
    return Table("Issue 8 targets", ["target", "this run", "verdict"], rows)


def profile_tables(res: dict, top: int = 15) -> list[Table]:
    out = []
    for name, p in (res.get("profiles") or {}).items():
        if not p.get("samples"):
            continue
        rows = [[s[0], f"{s[1]:.1f}%", t[0], f"{t[1]:.1f}%"]
                for s, t in zip(p["self"][:top], p["total"][:top])]
        out.append(Table(f"py-spy profile of odradek, {name} ({p['samples']} samples, "
                         f"{p['records_per_s'] / 1e3:,.0f}k rec/s, broker busy {100 * p['busy']:.0f}%)",
                         ["self (own code)", "%", "total (on the stack)", "%"], rows))
    return out


def all_tables(res: dict) -> list[Table]:
    tables = [limits_table(res) if res.get("limits") else None, targets_table(res),
              throughput_table(res), latency_table(res), partitions_table(res),
              log_size_table(res), *profile_tables(res)]
    return [t for t in tables if t is not None and t.rows]
