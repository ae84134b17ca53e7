"""`PollHandler`: kazoo's threading handler with a ``select`` that costs one ``poll(2)``.

kazoo's connection thread (``ConnectionHandler._connect_attempt``) calls ``handler.select``
once per request sent, once per answer or watch event read and once more before each write;
kazoo's own ``select`` (``kazoo.handlers.utils.selector_select``) builds a new
``selectors.DefaultSelector`` each time: an ``epoll_create``, an ``epoll_ctl`` per socket,
the wait and a ``close``, behind the selectors module's bookkeeping. At 10,000 partitions a
controller failover is tens of thousands of requests and watch events on each broker's
session, and profiles of the brokers showed half of kazoo's thread in building and closing
those selectors, with the GIL held by it while the controller and the metadata cache waited
for answers.

A ``select.poll`` object is a plain set of descriptors until it is polled: one system call
per ``select``, and no limit on descriptor numbers (a broker with 20,000 open files has
sockets above ``select(2)``'s 1,024). Readiness is reported as `selectors` reports it: an
error or hang-up makes a descriptor both readable and writable, so kazoo reads and sees the
failure.
"""

from __future__ import annotations

import select

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT


def poll_select(rlist, wlist, xlist, timeout: float | None = None) -> tuple[list, list, list]:
    """``select.select``'s contract (the ready objects of ``rlist`` and ``wlist``; ``xlist``
    is never reported, as in kazoo's) with one ``poll(2)``; ``timeout`` in seconds, None to
    wait for ever."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    for obj in rlist:
        fd = fileobj_to_fd(obj)
        masks[fd] = masks.get(fd, 0) | _READ
    for obj in wlist:
        fd = fileobj_to_fd(obj)
        masks[fd] = masks.get(fd, 0) | _WRITE
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = dict(poller.poll(None if timeout is None else timeout * 1000))
    if not ready:
        return [], [], []
    # as `selectors.PollSelector`: any bit but POLLIN counts as writable (POLLERR, POLLHUP),
    # any bit but POLLOUT as readable
    readable = [o for o in rlist if ready.get(fileobj_to_fd(o), 0) & ~_WRITE]
    writable = [o for o in wlist if ready.get(fileobj_to_fd(o), 0) & ~select.POLLIN]
    return readable, writable, []


class PollHandler(SequentialThreadingHandler):
    """kazoo's ``SequentialThreadingHandler`` with `poll_select` as its ``select``."""

    def select(self, *args, **kwargs):
        return poll_select(*args, **kwargs)
