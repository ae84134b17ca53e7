"""File regions of fetch responses onto a connection's socket (``server/connection.py``).

A record batch in a fetch response is a region of a segment file (``fd``, ``position``,
``length``). When nothing is queued ahead of it in the transport (so bytes stay in order) it
goes out with ``os.sendfile``: zero-copy. Whatever sendfile cannot take now, and regions under
``SENDFILE_MIN``, go through the transport as bytes read with one ``pread``. Under TLS there is
no sendfile (the socket carries encrypted records, so file bytes written to it straight would
corrupt the stream): the connection says so with ``sendfile_allowed=False``.
"""

from __future__ import annotations

import os

# Below this a region is cheaper to pread and write than to sendfile (two syscalls + checks).
SENDFILE_MIN = 16 * 1024


def write_region(connection, region, sendfile_allowed: bool) -> None:
    """Write ``region`` to ``connection.transport``; a failed sendfile closes the connection."""
    transport = connection.transport
    sent = 0
    length = region.length
    sock = _socket_fd(transport) if sendfile_allowed else None
    if sock is not None and length >= SENDFILE_MIN and transport.get_write_buffer_size() == 0:
        try:
            while sent < length:
                n = os.sendfile(sock, region.fd, region.position + sent, length - sent)
                if n == 0:
                    break
                sent += n
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            connection.close(f"send failed: {e}")
            return
    if sent < length:
        transport.write(os.pread(region.fd, length - sent, region.position + sent))


def _socket_fd(transport) -> int | None:
    """The transport's socket, or None (no transport, or its socket is gone)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        return sock.fileno() if sock is not None else None
    except (OSError, ValueError):
        return None
