import gc
import os

from odradek.storage.file_handle_cache import FileHandleCache, SegmentFile


class Holder:
    def __init__(self, path):
        self.path = path
        self.file = None
        self.released = 0

    def use(self, cache):
        if self.file is None:
            self.file = SegmentFile(self.path)
        cache.touch(self)
        return self.file

    def release_handles(self):
        self.file = None
        self.released += 1


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_lru_bounds_open_files(tmp_path):
    paths = []
    for i in range(50):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"data%d" % i)
        paths.append(str(p))
    cache = FileHandleCache(max_open=5)
    holders = [Holder(p) for p in paths]
    before = open_fds()
    for h in holders:
        h.use(cache)
    gc.collect()
    assert len(cache) == 5
    assert open_fds() - before <= 5
    assert sum(h.file is not None for h in holders) == 5
    # The most recent five are the ones kept.
    assert all(h.file is not None for h in holders[-5:])


def test_touch_refreshes_recency(tmp_path):
    paths = [tmp_path / f"f{i}" for i in range(3)]
    for p in paths:
        p.write_bytes(b"x")
    cache = FileHandleCache(max_open=2)
    a, b, c = (Holder(str(p)) for p in paths)
    a.use(cache)
    b.use(cache)
    a.use(cache)
    c.use(cache)
    assert a.file is not None and b.file is None and c.file is not None


def test_evicted_descriptor_stays_valid_while_referenced(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"hello world")
    cache = FileHandleCache(max_open=1)
    h1, h2 = Holder(str(p)), Holder(str(p))
    kept = h1.use(cache)
    h2.use(cache)  # evicts h1
    assert h1.file is None
    assert kept.read_exact(6, 5) == b"world"
    fd = kept.fd
    del kept
    gc.collect()
    assert not os.path.exists(f"/proc/self/fd/{fd}") or os.readlink(
        f"/proc/self/fd/{fd}"
    ) != str(p)


def test_segment_file_read_write(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"")
    f = SegmentFile(str(p))
    f.write_at(b"abcdef", 0)
    f.write_at(b"XY", 2)
    assert f.read_exact(0, 6) == b"abXYef"
    assert f.size() == 6
    try:
        f.read_exact(4, 10)
    except EOFError:
        pass
    else:
        raise AssertionError("expected EOFError")


def test_touching_the_latest_holder_again_changes_nothing_and_discard_forgets_it(tmp_path):
    paths = [tmp_path / f"f{i}" for i in range(3)]
    for p in paths:
        p.write_bytes(b"x")
    cache = FileHandleCache(max_open=2)
    a, b, c = (Holder(str(p)) for p in paths)
    a.use(cache)
    b.use(cache)
    b.use(cache)  # the latest: a no-op
    assert len(cache) == 2 and a.file is not None
    cache.discard(b)
    b.file = None
    assert len(cache) == 1
    b.use(cache)  # discarded, so registered again (not skipped as "the latest")
    assert len(cache) == 2
    c.use(cache)  # evicts the least recent: a
    assert a.file is None and b.file is not None and c.file is not None


def test_write_at_finishes_a_short_write(tmp_path, monkeypatch):
    p = tmp_path / "f"
    p.write_bytes(b"")
    f = SegmentFile(str(p))
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, pos: real(fd, memoryview(data)[:3], pos))
    f.write_at(b"abcdefgh", 0)
    monkeypatch.undo()
    assert f.read_exact(0, 8) == b"abcdefgh"
