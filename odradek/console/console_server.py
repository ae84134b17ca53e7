"""Running the console's web app: in the foreground (``odradek console``) or on a thread of
its own beside other work (``odradek demo --follow``, tests).

    with ConsoleServer(ConsoleConfig("127.0.0.1:9092")) as console:
        print(console.url)            # http://127.0.0.1:<port>/ (port 0: a free one)

The thread runs its own event loop, so the console's clients never share a loop with the
caller's.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager

from aiohttp import web

from odradek.console.app import ConsoleConfig, make_app

# How long stopping waits for requests in flight (a page's answer takes well under a second;
# a browser's idle keep-alive connections are not waited for).
SHUTDOWN_SECONDS = 2.0


async def start_site(config: ConsoleConfig) -> tuple[web.AppRunner, str]:
    """Set up and start the app; returns the runner (``cleanup()`` stops it) and the URL."""
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    host, port = runner.addresses[0][:2]
    shown = f"[{host}]" if ":" in host else host
    return runner, f"http://{shown}:{port}/"


async def serve(config: ConsoleConfig, on_ready, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or the task is cancelled); ``on_ready(url)`` once listening."""
    runner, url = await start_site(config)
    try:
        on_ready(url)
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()


class ConsoleServer:
    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> str:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            try:
                self._runner, self.url = loop.run_until_complete(start_site(self.config))
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._runner.cleanup())
                loop.close()

        self._thread = threading.Thread(target=run, name="odradek-console", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("the console did not start listening")
        if failure:
            raise failure[0]
        return self.url

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._thread = None

    def __enter__(self) -> "ConsoleServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def console_beside(bootstrap: str, say, port: int = 0, client: dict | None = None):
    """Serve a console for ``bootstrap`` on 127.0.0.1 while the ``with`` body runs (``odradek
    demo --follow``); ``say(text)`` tells its address, or why it did not start (a busy
    port): the work it sits beside goes on either way. Yields the server, or None."""
    server = ConsoleServer(ConsoleConfig(bootstrap, client or {}, port=port))
    try:
        server.start()
    except OSError as e:
        say(f"the web console did not start: {e.strerror or e}")
        yield None
        return
    say(f"web console at {server.url}")
    try:
        yield server
    finally:
        server.stop()
