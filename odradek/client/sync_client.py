"""What every synchronous client of ``sync`` is built on (``_SyncClient``): an asyncio client
started on its own event loop, run forever in a daemon thread (``EventLoopThread``), with the
client's calls handed to that loop and their results or exceptions handed back
(``_forward`` for coroutines, ``_forward_sync`` for plain methods, which must run on the
loop's thread too). Closing the client stops the thread and closes the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

__all__ = ["EventLoopThread", "new_event_loop"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (a project dependency: cheaper futures, timers and
    cross-thread wake-ups), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EventLoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str, loop_factory=new_event_loop) -> None:
        self.loop = loop_factory()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the loop and return its result (raising its exception)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def call(self, fn, *args):
        """Call ``fn(*args)`` on the loop's thread and return its result."""
        async def call():
            return fn(*args)

        return self.run(call())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def _forward(name: str, target):
    """A method that runs the async client's method ``name`` on the loop."""
    def method(self, *args, **kwargs):
        return self._thread.run(getattr(self._client, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = getattr(target, name).__doc__
    return method


def _forward_sync(name: str, target):
    """A method that calls the async client's plain method ``name`` on the loop's thread."""
    def method(self, *args, **kwargs):
        return self._thread.call(lambda: getattr(self._client, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = getattr(target, name).__doc__
    return method


class _SyncClient:
    _client = None

    def __init__(self, client, name: str) -> None:
        self._thread = EventLoopThread(name)
        self._client = client
        try:
            self._thread.run(client.start())
        except BaseException:
            self._thread.stop()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._client.close(), None if timeout is None else timeout + 5)
        finally:
            self._thread.stop()
