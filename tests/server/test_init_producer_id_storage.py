"""InitProducerId when the block of producer ids cannot be recorded (a full disk under the
metadata store): a retriable error code, not a closed connection; ids once the disk takes
the write again."""

import errno
import os

from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.wire import WireClient, message


def test_a_refused_block_reservation_is_answered_with_a_retriable_error(broker, monkeypatch):
    store = broker.broker.metadata.store

    def enospc(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    client = WireClient(broker.bootstrap)
    request = message("InitProducerIdRequest", transactional_id=None, transaction_timeout_ms=60000)
    for name in ("create", "set"):
        monkeypatch.setattr(store, name, enospc)
    _, response = client.request("InitProducerId", 1, request)
    assert (response.error_code, response.producer_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)
    monkeypatch.undo()
    _, response = client.request("InitProducerId", 1, request)
    assert response.error_code == ErrorCode.NONE and response.producer_id >= 0
    client.close()
