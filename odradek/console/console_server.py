"""Running the console's web app: in the foreground (``odradek console``) or on a thread of
its own beside other work (``odradek demo --follow``, tests).

    with ConsoleServer(ConsoleConfig("127.0.0.1:9092")) as console:
        print(console.url)            # http://127.0.0.1:<port>/ (port 0: a free one)

The thread runs its own event loop, so the console's clients never share a loop with the
caller's.

Before listening, ``check_listener`` refuses what would hand the console's Kafka credentials
to a network: a non-loopback bind without authentication (unless ``insecure_no_auth`` says so
on purpose), and credentials over plain HTTP on a non-loopback bind (no TLS certificate).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from contextlib import contextmanager

from aiohttp import web

from odradek.console.app import ConsoleConfig, make_app
from odradek.console.host_check import is_loopback

# How long stopping waits for requests in flight (a page's answer takes well under a second;
# a browser's idle keep-alive connections are not waited for).
SHUTDOWN_SECONDS = 2.0


class UnsafeListener(ValueError):
    """A console configuration that would expose the cluster (``check_listener``)."""


def check_listener(config: ConsoleConfig) -> None:
    """Raise ``UnsafeListener`` (a one-line reason, in the command's option names) for a
    console that must not start: a TLS certificate without its key or the other way round;
    ``insecure_no_auth`` together with credentials; and, on a bind that is not loopback
    (host_check.is_loopback: a wildcard bind is not), no authentication unless
    ``insecure_no_auth``, or credentials without TLS."""
    if (config.ssl_certfile is None) != (config.ssl_keyfile is None):
        raise UnsafeListener("--ssl-certfile and --ssl-keyfile go together")
    if config.insecure_no_auth and config.auth.required:
        raise UnsafeListener("--insecure-no-auth contradicts --user/--token-file: choose one")
    if is_loopback(config.host):
        return
    where = f"--host {config.host or '(all addresses)'} is not loopback"
    if not config.auth.required and not config.insecure_no_auth:
        raise UnsafeListener(f"{where}: everyone who reaches it would act with the console's Kafka credentials; "
                             "give --user (password in --password-file or $ODRADEK_CONSOLE_PASSWORD) or "
                             "--token-file, with --ssl-certfile and --ssl-keyfile, or --insecure-no-auth")
    if config.auth.required and config.ssl_certfile is None:
        raise UnsafeListener(f"{where}: credentials would cross the network in plain text; "
                             "give --ssl-certfile and --ssl-keyfile")


def server_ssl_context(config: ConsoleConfig) -> ssl.SSLContext | None:
    """The TLS context of ``config``'s PEM certificate chain and key, or None without TLS."""
    if config.ssl_certfile is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile)
    return context


async def start_site(config: ConsoleConfig) -> tuple[web.AppRunner, str]:
    """Check the configuration (``check_listener``), set up and start the app; returns the
    runner (``cleanup()`` stops it) and the URL."""
    check_listener(config)
    context = server_ssl_context(config)
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, ssl_context=context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    host, port = runner.addresses[0][:2]
    shown = f"[{host}]" if ":" in host else host
    return runner, f"{'https' if context else 'http'}://{shown}:{port}/"


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
