"""Many znodes read in one ZooKeeper request: ``multiRead`` (opcode 22, ZooKeeper 3.6+).

kazoo (2.11) has no call for it, but sends any request record with ``type``, ``serialize()``
and ``deserialize(bytes, offset)``; `MultiRead` is that record for ``getData`` operations.
kazoo spends ~100-150 µs of Python per request (queueing, framing, a result object and its
wake-up), so a new controller reading 30,000 partition states took 4-5 s one request each;
one request per `BATCH` paths costs that once per batch.

Wire format (ZooKeeper's ``MultiOperationRecord`` and ``MultiResponse``): the request is, per
path, a ``MultiHeader`` (int type = 4, bool done = false, int err = -1) and a
``GetDataRequest`` (string path, bool watch = false), then a closing header (-1, true, -1).
The answer is, per operation, a header (type, done, err) and, for type 4, a
``GetDataResponse`` (buffer data, ``Stat``), for type -1 an ``ErrorResponse`` (int err); then
the closing header. Each operation succeeds or fails on its own (a missing znode answers
NONODE for its path only); nothing is atomic, as with separate reads.

`read_many` answers ``(data, version)``, None (no znode) or a kazoo exception instance per
path; it raises `MultiReadUnsupported` where the server does not know the opcode (ZooKeeper
before 3.6 answers UNIMPLEMENTED and closes the connection), so the caller reads path by path
from then on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    ZnodeStat,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)

BATCH = 1000  # paths per request: ~60 KB asked, ~200 KB answered for partition states
GET_DATA = GetData.type
ERROR = -1


class MultiReadUnsupported(Exception):
    """The ZooKeeper server does not implement multiRead."""


class MultiRead(NamedTuple):
    """kazoo's request record for one multiRead of ``paths`` (already chrooted)."""

    paths: tuple[str, ...]
    type = 22

    def serialize(self) -> bytearray:
        out = bytearray()
        header = multiheader_struct.pack(GET_DATA, False, -1)
        for path in self.paths:
            out += header
            out += write_string(path)
            out.append(0)  # no watch
        out += multiheader_struct.pack(-1, True, -1)
        return out

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list:
        results = []
        while True:
            header, offset = MultiHeader.deserialize(data, offset)
            if header.done:
                return results
            if header.type == GET_DATA:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == ERROR:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            else:
                raise ValueError(f"multiRead answered an operation of type {header.type}")


def read_many(client, paths: Sequence[str]) -> list:
    """``(data, version)``, None where there is no znode, or a kazoo exception instance (any
    other failure of that path) for each of ``paths`` (not chrooted), in order: `BATCH` paths
    a request, every request in flight at once. Raises kazoo's exception when a whole
    request fails (a lost connection), `MultiReadUnsupported` when the server does not know
    the request."""
    chroot = client.chroot or ""
    pending = []
    for start in range(0, len(paths), BATCH):
        batch = paths[start:start + BATCH]
        result = client.handler.async_result()
        client._call(MultiRead(tuple(chroot + p if p != "/" else chroot or p for p in batch)), result)
        pending.append((len(batch), result))
    out: list = []
    for size, result in pending:
        try:
            answers = result.get()
        except UnimplementedError as e:
            raise MultiReadUnsupported(str(e)) from e
        if len(answers) != size:
            raise MultiReadUnsupported(f"multiRead answered {len(answers)} of {size} reads")
        out += [None if isinstance(a, NoNodeError)
                else a if isinstance(a, Exception) else (a[0] or b"", a[1].version) for a in answers]
    return out
