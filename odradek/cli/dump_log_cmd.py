"""``odradek dump-log``: print segment and index files, read directly from disk
(``kafka-dump-log.sh``; no broker is involved).

    odradek dump-log --files /data/events-0/00000000000000000000.log --print-data-log
    odradek dump-log --files 00000000000000000000.index,00000000000000000000.timeindex --verify-index-only

``.log``: one line per batch (offsets, count, producer id/epoch/sequence, leader epoch,
transactional and control flags, timestamp, size, magic, codec, CRC and whether it checks
out), then one ``|`` line per record (offset, timestamp, key and value sizes, header keys;
a control record's commit/abort marker). Compressed batches are decompressed to list their
records. ``--print-data-log`` adds keys, values and headers (as UTF-8, other bytes
escaped). Bytes at the end that are not a whole batch are reported, as Kafka does.

``.index`` (offset -> position) and ``.timeindex`` (timestamp -> offset): one line per entry,
each checked against the ``.log`` beside it: an offset entry must point at a batch boundary
whose batch starts at or below its offset; a time entry's timestamp must be the largest
timestamp of the log up to the batch holding its offset. ``--verify-index-only`` prints the
mismatches only. (The broker writes the active segment's indexes out when the segment rolls
or the log closes, so an index of a running broker's active segment may be behind.)

Exit status 1 when anything is invalid or inconsistent (found problems are printed first).
``--output json`` prints one object per batch or entry, and per problem. When the dump goes
to a file or a pipe (or ``--verify-index-only`` prints only problems) and standard error is a
terminal, it shows a bar of the bytes of each .log file read (``--no-progress``: none). A dump
scrolling by on the terminal shows its progress itself: redrawing a bar under every line
made it four times slower.
"""

from __future__ import annotations

import argparse
import bisect
import os
import struct
import sys
from pathlib import Path

from odradek.cli.common import CommandError, add_output, print_json, run_command, text_of
from odradek.cli.progress import add_no_progress, bytes_bar
from odradek.records import compression as codecs
from odradek.records.batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, read_header
from odradek.records.control import decode_end_txn_marker
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import MIN_MESSAGE_SIZE, LegacyBatch, read_message
from odradek.records.reader import RecordBatch
from odradek.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.segment import INDEX_EXT, LOG_EXT, TIME_INDEX_EXT
from odradek.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from odradek.storage.time_index import TimeIndex

_PREFIX = struct.Struct(">qi")  # base offset (legacy: offset), length; the magic byte is at 16
_MAGIC_END = 17
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_BAR_EVERY = 256  # entries between moves of the progress bar: its update costs more than a header read


def add_parser(sub) -> None:
    p = sub.add_parser("dump-log", help="print segment (.log) and index files, without a broker",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", required=True, metavar="FILE[,FILE]",
                   help=".log, .index or .timeindex files, joined by commas")
    p.add_argument("--print-data-log", action="store_true", help="also print keys, values and headers")
    p.add_argument("--verify-index-only", action="store_true", help="only check indexes (and logs), print problems")
    add_output(p, ("text", "json"))
    add_no_progress(p)


def run(args) -> int:
    return run_command("dump-log", _run, args)


class Report:
    """Where the dump goes: text lines or JSON objects; counts the problems found."""

    def __init__(self, output: str, quiet: bool) -> None:
        self.json = output == "json"
        self.quiet = quiet
        self.problems = 0

    def item(self, document: dict, text: str) -> None:
        if self.quiet:
            return
        if self.json:
            print_json(document)
        else:
            print(text)

    def note(self, text: str) -> None:
        if not self.json and not self.quiet:
            print(text)

    def problem(self, file: str, text: str, **fields) -> None:
        self.problems += 1
        if self.json:
            print_json({"file": file, "problem": text, **fields})
        else:
            print(f"{file}: {text}")


def _run(args) -> int:
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    if not files:
        raise CommandError("--files names no file")
    report = Report(args.output, args.verify_index_only)
    to_screen = hasattr(sys.stdout, "isatty") and sys.stdout.isatty() and not args.verify_index_only
    with bytes_bar(enabled=not (args.no_progress or to_screen)) as bar:
        for name in files:
            path = Path(name)
            if not path.is_file():
                raise CommandError(f"{name}: no such file")
            if path.suffix == LOG_EXT:
                dump_log(path, report, args.print_data_log, bar)
            elif path.suffix == INDEX_EXT:
                dump_index(path, report, time_index=False, verify_only=args.verify_index_only, bar=bar)
            elif path.suffix == TIME_INDEX_EXT:
                dump_index(path, report, time_index=True, verify_only=args.verify_index_only, bar=bar)
            else:
                raise CommandError(f"{name}: not a .log, .index or .timeindex file")
    if report.problems:
        raise CommandError(f"found {report.problems} problem(s) in {len(files)} file(s)")
    return 0


# --- walking a .log file -----------------------------------------------------------------
def scan(path: Path):
    """Yield ``(position, bytes)`` of every entry (v2 batch or legacy message) whose length
    fits the file and its format, then ``(position, None, reason)`` once if bytes remain
    that are not a whole entry. Reads one entry at a time."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            prefix = os.pread(fd, _MAGIC_END, pos)
            if len(prefix) < _MAGIC_END:
                yield pos, None, f"{size - pos} bytes at position {pos} are too few for a batch header"
                return
            _, length = _PREFIX.unpack_from(prefix)
            magic = prefix[16]
            smallest = BATCH_HEADER_SIZE - LOG_OVERHEAD if magic == 2 else MIN_MESSAGE_SIZE.get(magic)
            if smallest is None:
                yield pos, None, f"unknown magic {magic} at position {pos}"
                return
            if length < smallest or pos + LOG_OVERHEAD + length > size:
                yield pos, None, f"batch at position {pos} claims {length} bytes, which do not fit"
                return
            yield pos, os.pread(fd, LOG_OVERHEAD + length, pos), None
            pos += LOG_OVERHEAD + length


class Reading:
    """A progress bar's task for one .log file: bytes read of its size, moved every
    ``_BAR_EVERY`` entries (``at``); nothing at all without a bar, or with a disabled one."""

    def __init__(self, bar, path: Path) -> None:
        self.bar = None if bar is None or bar.disable else bar
        self.entries = 0
        if self.bar is not None:
            self.size = path.stat().st_size
            self.task = self.bar.add_task(f"reading {path.name}", total=self.size)

    def at(self, position: int) -> None:
        self.entries += 1
        if self.bar is not None and self.entries % _BAR_EVERY == 0:
            self.bar.update(self.task, completed=position)

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.size)


def dump_log(path: Path, report: Report, print_data: bool, bar=None) -> None:
    report.note(f"Dumping {path}")
    if path.stem.isdigit():
        report.note(f"Log starting offset: {int(path.stem)}")
    batches = records = 0
    reading = Reading(bar, path)
    for position, data, reason in scan(path):
        reading.at(position)
        if data is None:
            report.problem(str(path), f"Found {path.stat().st_size - position} invalid bytes at the end of "
                           f"{path.name}: {reason}", position=position)
            break
        doc = describe_v2(data, position, print_data) if data[16] == 2 else describe_legacy(data, position, print_data)
        if not doc["valid"]:
            report.problem(str(path), f"invalid batch at position {position}: {doc['error']}", position=position)
        batches += 1
        records += len(doc.get("records") or ())
        report.item({"file": str(path), **doc}, batch_text(doc))
        for record in doc.get("records") or ():
            report.item({"file": str(path), "batch_position": position, **record}, record_text(record, doc))
    reading.done()
    report.note(f"{batches} batches, {records} records")


def describe_v2(data: bytes, position: int, print_data: bool) -> dict:
    """A v2 batch as a JSON-ready dict; ``records`` when its CRC checks out and it decodes."""
    h = read_header(data)
    doc = {
        "position": position, "base_offset": h.base_offset, "last_offset": h.last_offset,
        "count": h.records_count, "base_sequence": h.base_sequence,
        "last_sequence": _sequence(h.base_sequence, h.last_offset_delta), "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch, "partition_leader_epoch": h.partition_leader_epoch,
        "is_transactional": h.is_transactional, "is_control": h.is_control,
        "timestamp_type": _TIMESTAMP_TYPES[h.timestamp_type], "max_timestamp": h.max_timestamp,
        "size": h.size, "magic": 2, "compression": codecs.CODEC_NAMES.get(h.compression, str(h.compression)),
        "crc": h.crc, "valid": True, "error": None, "records": None,
    }
    try:
        batch = RecordBatch(data)  # checks the CRC-32C first
        doc["records"] = [_record(r, h, print_data) for r in batch.records()]
    except CorruptRecordError as e:
        doc["valid"], doc["error"] = False, str(e)
    return doc


def _sequence(base: int, delta: int) -> int:
    if base < 0:
        return -1
    return (base + delta) & 0x7FFFFFFF  # sequences wrap at int32 max, as producers number them


def _record(r, h, print_data: bool) -> dict:
    doc = {"offset": r.offset, "timestamp": r.timestamp,
           "key_size": -1 if r.key is None else len(r.key), "value_size": -1 if r.value is None else len(r.value),
           "sequence": _sequence(h.base_sequence, r.offset - h.base_offset),
           "header_keys": [k for k, _ in r.headers]}
    if h.is_control:
        try:
            marker = decode_end_txn_marker(r)
            doc["control"] = {"type": "COMMIT" if marker.committed else "ABORT",
                              "coordinator_epoch": marker.coordinator_epoch}
        except CorruptRecordError as e:
            doc["control"] = {"type": "UNKNOWN", "error": str(e)}
    if print_data:
        doc["key"] = None if r.key is None else text_of(r.key)
        doc["value"] = None if r.value is None else text_of(r.value)
        doc["headers"] = [[k, None if v is None else text_of(v)] for k, v in r.headers]
    return doc


def describe_legacy(data: bytes, position: int, print_data: bool) -> dict:
    """A magic 0/1 entry (a message, or a compressed wrapper of messages) like a batch."""
    doc = {"position": position, "magic": data[16], "size": len(data), "valid": True, "error": None,
           "records": None}
    try:
        message = read_message(data, 0, len(data))
        inner = LegacyBatch(message).records()
    except CorruptRecordError as e:
        doc.update(valid=False, error=str(e), base_offset=_PREFIX.unpack_from(data)[0])
        return doc
    doc.update(base_offset=inner[0].offset, last_offset=message.offset, count=len(inner),
               timestamp_type=_TIMESTAMP_TYPES[message.timestamp_type], max_timestamp=message.timestamp,
               compression=codecs.CODEC_NAMES.get(message.compression, str(message.compression)),
               crc=struct.unpack_from(">I", data, 12)[0])
    fake_header = _LegacyHeader(inner[0].offset)
    doc["records"] = [_record(r, fake_header, print_data) for r in inner]
    return doc


class _LegacyHeader:
    """What ``_record`` reads of a header, for messages without producer fields."""

    base_sequence = -1
    is_control = False

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset


def batch_text(doc: dict) -> str:
    if doc["magic"] != 2:
        if not doc["valid"]:
            return f"offset: {doc['base_offset']} position: {doc['position']} magic: {doc['magic']} isvalid: false"
        return (f"baseOffset: {doc['base_offset']} lastOffset: {doc['last_offset']} count: {doc['count']} "
                f"position: {doc['position']} {doc['timestamp_type']}: {doc['max_timestamp']} size: {doc['size']} "
                f"magic: {doc['magic']} compresscodec: {doc['compression']} crc: {doc['crc']} isvalid: true")
    return (f"baseOffset: {doc['base_offset']} lastOffset: {doc['last_offset']} count: {doc['count']} "
            f"baseSequence: {doc['base_sequence']} lastSequence: {doc['last_sequence']} "
            f"producerId: {doc['producer_id']} producerEpoch: {doc['producer_epoch']} "
            f"partitionLeaderEpoch: {doc['partition_leader_epoch']} "
            f"isTransactional: {str(doc['is_transactional']).lower()} isControl: {str(doc['is_control']).lower()} "
            f"position: {doc['position']} {doc['timestamp_type']}: {doc['max_timestamp']} size: {doc['size']} "
            f"magic: 2 compresscodec: {doc['compression']} crc: {doc['crc']} isvalid: {str(doc['valid']).lower()}")


def record_text(r: dict, batch: dict) -> str:
    line = (f"| offset: {r['offset']} {batch.get('timestamp_type', 'CreateTime')}: {r['timestamp']} "
            f"keySize: {r['key_size']} valueSize: {r['value_size']} sequence: {r['sequence']} "
            f"headerKeys: [{','.join(r['header_keys'])}]")
    control = r.get("control")
    if control is not None:
        line += f" endTxnMarker: {control['type']}"
        if "coordinator_epoch" in control:
            line += f" coordinatorEpoch: {control['coordinator_epoch']}"
    if "key" in r:
        headers = ",".join(f"{k}:{'null' if v is None else v}" for k, v in r["headers"])
        line += f" key: {'null' if r['key'] is None else r['key']} payload: {'null' if r['value'] is None else r['value']}"
        if headers:
            line += f" headers: {headers}"
    return line


# --- index files -------------------------------------------------------------------------
def log_bounds(log_path: Path, bar=None) -> list[tuple[int, int, int, int]]:
    """``(position, base_offset, last_offset, max_timestamp)`` of each entry of a .log file
    (headers only; stops at bytes that are not a whole entry)."""
    bounds = []
    reading = Reading(bar, log_path)
    for position, data, _ in scan(log_path):
        reading.at(position)
        if data is None:
            break
        if data[16] == 2:
            h = read_header(data)
            bounds.append((position, h.base_offset, h.last_offset, h.max_timestamp))
        else:
            offset = _PREFIX.unpack_from(data)[0]
            timestamp = struct.unpack_from(">q", data, 18)[0] if data[16] == 1 else -1
            bounds.append((position, offset, offset, timestamp))
    reading.done()
    return bounds


def dump_index(path: Path, report: Report, *, time_index: bool, verify_only: bool, bar=None) -> None:
    """Every entry of an index file, checked against the .log beside it when there is one."""
    if not path.stem.isdigit():
        raise CommandError(f"{path}: an index file is named by its segment's base offset (20 digits)")
    data = path.read_bytes()
    entry_size = TIME_ENTRY_SIZE if time_index else OFFSET_ENTRY_SIZE
    whole = len(data) - len(data) % entry_size
    # The storage layer's own index views: no sanity check on construction, so every entry,
    # however wrong, can be shown and judged one by one.
    index = (TimeIndex if time_index else OffsetIndex)(int(path.stem), whole // entry_size, data[:whole])
    log_path = path.with_suffix(LOG_EXT)
    bounds = log_bounds(log_path, bar) if log_path.is_file() else None
    if bounds is None and verify_only:
        raise CommandError(f"cannot verify {path}: {log_path.name} is not beside it")
    report.note(f"Dumping {path}")
    if whole != len(data):
        report.problem(str(path), f"{len(data) - whole} bytes at the end are not a whole entry")
    check = _TimeChecker(bounds) if time_index else _OffsetChecker(bounds)
    for n in range(len(index)):
        a, b = index.entry(n)
        if time_index:
            doc, text = {"timestamp": a, "offset": b}, f"timestamp: {a} offset: {b}"
        else:
            doc, text = {"offset": a, "position": b}, f"offset: {a} position: {b}"
        report.item({"file": str(path), **doc}, text)
        trouble = check(**doc)
        if trouble:
            report.problem(str(path), f"index mismatch at {text}: {trouble}", **doc)
    if bounds is None:
        report.note(f"{len(index)} entries (no {log_path.name} beside it: not verified)")
    else:
        report.note(f"{len(index)} entries checked against {log_path.name}")


class _OffsetChecker:
    """Checks offset index entries, in order, against the log's batches."""

    def __init__(self, bounds) -> None:
        self.bounds = bounds
        self.at = {b[0]: b for b in bounds or ()}
        self.last = (-1, -1)

    def __call__(self, offset: int, position: int) -> str | None:
        previous, self.last = self.last, (offset, position)
        if offset <= previous[0] or position <= previous[1]:
            return f"not after the previous entry (offset {previous[0]}, position {previous[1]})"
        if self.bounds is None:
            return None
        batch = self.at.get(position)
        if batch is None:
            return f"position {position} is not the start of a batch"
        if batch[1] > offset:
            return f"the batch at position {position} starts at offset {batch[1]}, after {offset}"
        if not self.bounds or offset > self.bounds[-1][2]:
            return f"offset {offset} is past the last offset of the log"
        return None


class _TimeChecker:
    """Checks time index entries against the log: the largest timestamp up to the batch
    holding the entry's offset must be the entry's timestamp."""

    def __init__(self, bounds) -> None:
        self.bounds = bounds
        self.bases = [b[1] for b in bounds or ()]
        self.running_max = []
        largest = -1
        for b in bounds or ():
            largest = max(largest, b[3])
            self.running_max.append(largest)
        self.last = (-1, -1)

    def __call__(self, timestamp: int, offset: int) -> str | None:
        previous, self.last = self.last, (timestamp, offset)
        if timestamp <= previous[0] or offset < previous[1]:
            return f"not after the previous entry (timestamp {previous[0]}, offset {previous[1]})"
        if self.bounds is None:
            return None
        i = bisect.bisect_right(self.bases, offset) - 1
        if i < 0 or offset > self.bounds[i][2]:
            return f"offset {offset} is in no batch of the log"
        if self.running_max[i] != timestamp:
            return f"the largest timestamp up to offset {offset} is {self.running_max[i]}"
        return None
