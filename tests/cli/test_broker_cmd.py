"""``odradek broker``'s process-level set-up (``cli/broker_cmd.serve``)."""

from __future__ import annotations

import asyncio
import gc
import signal

from odradek.cli.broker_cmd import serve
from odradek.server.config import BrokerConfig
from odradek.testing.broker import test_config as broker_props


def test_serve_freezes_what_start_up_built_and_stops_on_sigterm(tmp_path, capsys):
    """Once the broker is up, the objects start-up made are frozen out of the collector's
    full passes (``gc.freeze``); SIGTERM then stops the broker cleanly."""
    config = BrokerConfig.from_props(broker_props(tmp_path / "data"))
    frozen_when_ready = []

    def ready(broker):
        frozen_when_ready.append(gc.get_freeze_count())
        signal.raise_signal(signal.SIGTERM)  # serve's own handler: a clean stop

    assert gc.get_freeze_count() == 0
    try:
        assert asyncio.run(serve(config, ready)) == 0
    finally:
        gc.unfreeze()
    assert frozen_when_ready and frozen_when_ready[0] > 1000
    assert "ready" in capsys.readouterr().out
