"""The machine's own limits, measured in the same run as the brokers so ratios hold.

- loopback TCP: ``sendall`` of 1 MiB chunks into a connected socket, ``recv_into`` a reused
  1 MiB buffer on the other end (a second thread; both calls release the GIL);
- sendfile to loopback: ``os.sendfile`` of a file that sits in the page cache, same receiver;
- page-cache write: ``os.write`` of 1 MiB chunks to a new file, after a warm-up pass (the first
  big write after idle can run at a fifth of the warm speed), no fsync;
- fdatasync latency: 4 KiB ``os.write`` + ``os.fdatasync``, serially; this bounds how many
  durable commits per second a log can make without group commit.
Each bandwidth is the median of ``repeats`` passes; files go under ``work_dir`` (the disk the
odradek broker writes to) and are removed.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from pathlib import Path

MIB = 1 << 20


def _receiver(server: socket.socket, total: int, done: list) -> None:
    conn, _ = server.accept()
    buf = bytearray(MIB)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if n == 0:
            break
        got += n
    done.append(time.perf_counter())
    conn.close()


def _socket_pass(total: int, send) -> float:
    """Seconds to move ``total`` bytes through loopback with ``send(sock)``."""
    server = socket.create_server(("127.0.0.1", 0))
    done: list[float] = []
    t = threading.Thread(target=_receiver, args=(server, total, done), daemon=True)
    t.start()
    client = socket.create_connection(server.getsockname())
    begin = time.perf_counter()
    send(client)
    t.join(120)
    client.close()
    server.close()
    return done[0] - begin


def loopback_gbps(total_mib: int, repeats: int = 3) -> float:
    chunk = os.urandom(MIB)

    def send(sock):
        for _ in range(total_mib):
            sock.sendall(chunk)

    return statistics.median(total_mib * MIB / _socket_pass(total_mib * MIB, send) / 1e9
                             for _ in range(repeats))


def sendfile_gbps(work_dir: Path, total_mib: int, repeats: int = 3) -> float:
    path = Path(work_dir) / "limits-sendfile.bin"
    _write_file(path, total_mib)
    fd = os.open(path, os.O_RDONLY)
    total = total_mib * MIB

    def send(sock):
        sock.setblocking(True)
        sent = 0
        while sent < total:
            sent += os.sendfile(sock.fileno(), fd, sent, total - sent)

    try:
        return statistics.median(total / _socket_pass(total, send) / 1e9 for _ in range(repeats))
    finally:
        os.close(fd)
        path.unlink()


def _write_file(path: Path, total_mib: int) -> float:
    """Write ``total_mib`` MiB of 1 MiB chunks; return the seconds it took."""
    chunk = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        begin = time.perf_counter()
        for _ in range(total_mib):
            os.write(fd, chunk)
        return time.perf_counter() - begin
    finally:
        os.close(fd)


def page_cache_write_gbps(work_dir: Path, total_mib: int, repeats: int = 3) -> float:
    path = Path(work_dir) / "limits-write.bin"
    _write_file(path, total_mib)  # warm-up
    try:
        return statistics.median(total_mib * MIB / _write_file(path, total_mib) / 1e9
                                 for _ in range(repeats))
    finally:
        path.unlink()


def fdatasync_latency_ms(work_dir: Path, count: int) -> dict[str, float]:
    path = Path(work_dir) / "limits-fsync.bin"
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    samples = []
    try:
        for _ in range(count):
            begin = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            samples.append((time.perf_counter() - begin) * 1e3)
    finally:
        os.close(fd)
        path.unlink()
    samples.sort()
    return {"p50_ms": samples[len(samples) // 2], "p99_ms": samples[int(len(samples) * 0.99)],
            "max_ms": samples[-1], "count": count}


def measure(work_dir: Path, total_mib: int, fsync_count: int, repeats: int = 3) -> dict:
    """All limits, as the JSON report stores them."""
    work_dir.mkdir(parents=True, exist_ok=True)
    return {
        "loopback_tcp_gbps": loopback_gbps(total_mib, repeats),
        "sendfile_loopback_gbps": sendfile_gbps(work_dir, total_mib, repeats),
        "page_cache_write_gbps": page_cache_write_gbps(work_dir, total_mib, repeats),
        "fdatasync_4k": fdatasync_latency_ms(work_dir, fsync_count),
    }
