"""Brokers for tests: in-process (a thread with its own event loop) or as a subprocess.

``InProcessBroker`` is what most tests want: ``with InProcessBroker(tmp_path) as b:`` gives a
running broker on 127.0.0.1 with an ephemeral port (``b.bootstrap``). ``BrokerProcess`` runs
``odradek broker`` as a child process, for tests that kill -9 it or send it signals.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Self

from odradek.server.child_process import BrokerChildProcess
from odradek.server.config import BrokerConfig


def free_port() -> int:
    """A port free on 127.0.0.1 now (for configurations that must name one up front)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_config(data_dir, **overrides) -> dict[str, str]:
    """Broker properties for a test: loopback, ephemeral port, data in ``data_dir``."""
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "node.id": "1",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.num.partitions": "4",
    }
    props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return props


class InProcessBroker:
    def __init__(self, data_dir, props: dict[str, str] | None = None, *, clock=None, **overrides) -> None:
        """``clock``: the broker's wall clock (a ``FakeClock`` lets a test move the time that
        retention, expirations and flush policies see); the system clock by default."""
        self.props = props if props is not None else test_config(data_dir, **overrides)
        self.config = BrokerConfig.from_props(self.props)
        self.clock = clock
        self.broker = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def http_url(self) -> str:
        """The broker's first HTTP listener, ``http://127.0.0.1:NNNN`` (with ``http_listeners``
        set, e.g. ``InProcessBroker(path, http_listeners="http://127.0.0.1:0")``)."""
        return self.broker.metrics.http_urls[0]

    def start(self) -> "InProcessBroker":
        self._thread = threading.Thread(target=self._run, name="odradek-broker", daemon=True)
        self._thread.start()
        if not self._started.wait(30):
            raise TimeoutError("broker did not start in 30 s")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        from odradek.server.broker import Broker

        loop = asyncio.new_event_loop()
        self._loop = loop
        self.broker = Broker(self.config, self.clock)
        try:
            loop.run_until_complete(self.broker.start())
        except BaseException as e:  # noqa: BLE001 - handed to the starting thread
            self._error = e
            self._started.set()
            return
        self._started.set()
        loop.run_forever()
        loop.run_until_complete(self.broker.stop())
        loop.close()

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop and return its result (for inspection)."""
        async def wrapper():
            result = fn(*args)
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(30)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    def __enter__(self) -> "InProcessBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class BrokerProcess(BrokerChildProcess):
    """``odradek broker`` in a child process, configured by ``test_config``; leaving the
    ``with`` block kills it (kill -9)."""

    def __init__(self, data_dir, **overrides) -> None:
        super().__init__(test_config(data_dir, **overrides), cwd=Path(__file__).resolve().parents[2])

    def start(self, timeout: float = 30) -> Self:
        return super().start(timeout)

    def terminate(self) -> int:
        """Clean shutdown (SIGTERM); the exit status."""
        return self.stop()

    def __exit__(self, *exc) -> None:
        self.kill()
