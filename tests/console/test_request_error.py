"""Numbers in console requests: whole numbers (JSON numbers or decimal text) or a refusal
with INVALID_REQUEST."""

import pytest

from odradek.console.request_error import RequestError, integer
from odradek.protocol.generated.error_codes import ErrorCode


def test_whole_numbers_from_json_and_from_text():
    assert integer({"n": 3}, "n") == 3
    assert integer({"n": "12"}, "n") == 12
    assert integer({}, "n", 20) == 20
    assert integer({"n": ""}, "n", 20) == 20


@pytest.mark.parametrize("value", ["x", 1.5, True, [1]])
def test_anything_else_is_an_invalid_request(value):
    with pytest.raises(RequestError) as caught:
        integer({"n": value}, "n")
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_a_minimum():
    with pytest.raises(RequestError, match="at least 0"):
        integer({"n": -1}, "n", minimum=0)
