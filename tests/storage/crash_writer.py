"""Child process for test_crash: appends forever through a LogManager, flushing every
message as ``flush.messages=1`` asks, and prints each offset once it is durable."""

import random
import sys

from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import make_batch


def main(directory: str) -> None:
    config = LogConfig(flush_messages=1, segment_bytes=16 * 1024, index_interval_bytes=256)
    manager = LogManager([directory], config, SystemClock())
    manager.startup()
    log = manager.get_or_create_log("crash", 0)
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    appended = 0
    while True:
        data = make_batch(log.log_end_offset, rng.randint(1, 5), value_size=rng.randint(1, 400))
        info = LogAppendInfo.from_batches(data)
        log.append(data, info)
        for task in manager.flush_due(SystemClock().milliseconds()):
            task.run()
        appended += 1
        if appended % 7 == 0:
            manager.checkpoint()
        print(info.last_offset, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
