"""File regions of fetch responses onto a connection's socket (``server/connection.py``).

A record batch in a fetch response is a region of a segment file (``fd``, ``position``,
``length``). It goes out with ``os.sendfile`` (zero-copy) once everything before it left the
transport, so bytes stay in order. When the socket's buffer is full before the region is
(a 32 MiB fetch fills loopback's ~4 MB buffer many times over), the rest waits for the
socket to become writable and continues with sendfile (``RegionSender``), and the connection
holds every later part until then (``Connection._write``). (It used to ``pread`` the rest into
memory and queue it in the transport: on raw consume of 1 MiB batches with 32 MiB fetches
87% of the bytes went that way, a user-space copy and an allocation of up to 32 MiB each.)
Regions under ``SENDFILE_MIN`` go through the transport as bytes read with one ``pread``.
Under TLS there is no sendfile (the socket carries encrypted records, so file bytes written to
it straight would corrupt the stream): the connection says so with ``sendfile_allowed=False``,
and every region is read with one ``pread``.

Writability is watched on a duplicate of the socket's descriptor (``loop.add_writer``: the
transport's own descriptor is the transport's to watch), closed when the region is done or
the connection closes.
"""

from __future__ import annotations

import os
import time

# Below this a region is cheaper to pread and write than to sendfile (two syscalls + checks).
SENDFILE_MIN = 16 * 1024


def write_parts(connection, parts: list, sendfile_allowed: bool) -> tuple[RegionSender | None, list]:
    """Write ``parts`` (bytes-like objects and file regions) to ``connection.transport`` in
    order: ``(None, [])`` once all are written or queued in the transport, else the
    ``RegionSender`` still sending a region and the parts after it, which must wait for it."""
    run: list = []
    for i, part in enumerate(parts):
        if isinstance(part, (bytes, bytearray, memoryview)):
            run.append(part)
            continue
        if run:
            connection.transport.writelines(run)
            run = []
        sender = write_region(connection, part, sendfile_allowed)
        if sender is not None:
            return sender, parts[i + 1 :]
    if run:
        connection.transport.writelines(run)
    return None, []


def write_region(connection, region, sendfile_allowed: bool) -> RegionSender | None:
    """Write ``region`` to ``connection.transport``: None once it is all written or queued in
    the transport, or the ``RegionSender`` still sending it (the connection calls
    ``_region_sent`` when it is done); a failed sendfile closes the connection."""
    transport = connection.transport
    length = region.length
    sock = _socket_fd(transport) if sendfile_allowed and length >= SENDFILE_MIN else None
    if sock is not None:
        sender = RegionSender(connection, region, sock)
        if sender.send():
            return None
        if sender.wait():
            return sender
        sent = sender.sent  # (no descriptor to watch: the rest as bytes)
    else:
        sent = 0
    if sent < length and not connection.closed:
        transport.write(os.pread(region.fd, length - sent, region.position + sent))
    return None


class RegionSender:
    """The rest of one region, sent with sendfile as the socket takes it."""

    __slots__ = ("connection", "region", "sock", "sent", "_watched")

    def __init__(self, connection, region, sock: int) -> None:
        self.connection = connection
        self.region = region  # holds the segment file (and so its descriptor) until sent
        self.sock = sock
        self.sent = 0
        self._watched = -1  # the duplicate descriptor watched for writability

    def send(self) -> bool:
        """Send what the socket takes now; True once the region is all sent (or the
        connection closed on a failure)."""
        connection = self.connection
        if connection.closed:
            return True
        if connection.transport.get_write_buffer_size():
            return False  # bytes queued before the region go first
        region = self.region
        length = region.length
        try:
            while self.sent < length:
                n = os.sendfile(self.sock, region.fd, region.position + self.sent, length - self.sent)
                if n == 0:
                    connection.close("send failed: the segment file ended before the region")
                    return True
                self.sent += n
                connection.last_active = time.monotonic()  # the peer reads: not idle
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as e:
            connection.close(f"send failed: {e}")
            return True
        return True

    def wait(self) -> bool:
        """Watch the socket for writability; False if it cannot be watched."""
        try:
            self._watched = os.dup(self.sock)
            self.connection._loop.add_writer(self._watched, self._writable)
        except (OSError, RuntimeError, NotImplementedError):
            self.stop()
            return False
        return True

    def _writable(self) -> None:
        if self.send():
            self.stop()
            if not self.connection.closed:
                self.connection._region_sent()

    def stop(self) -> None:
        """Stop watching (done, or the connection is closing)."""
        fd, self._watched = self._watched, -1
        if fd >= 0:
            try:
                self.connection._loop.remove_writer(fd)
            except RuntimeError:
                pass  # the loop is closed
            os.close(fd)


def _socket_fd(transport) -> int | None:
    """The transport's socket, or None (no transport, or its socket is gone)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        return sock.fileno() if sock is not None else None
    except (OSError, ValueError):
        return None
