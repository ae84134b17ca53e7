"""Every API the broker advertises has a handler, and every handler is advertised."""

from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import APIS
from odradek.server.handlers import HANDLERS


def test_advertised_apis_and_handlers_agree():
    assert set(SUPPORTED) == set(HANDLERS)


def test_advertised_ranges_lie_within_the_specs():
    for key, (low, high) in SUPPORTED.items():
        assert APIS[key][3] <= low <= high <= APIS[key][4], key
