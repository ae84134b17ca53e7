"""How the message browser shows bytes: text, JSON and hex, null, and large values cut."""

from odradek.console import message_browser
from odradek.console.message_browser import bytes_view


def test_json_text_and_hex_of_a_value():
    view = bytes_view(b'{"a": [1, 2]}')
    assert view["text"] == '{"a": [1, 2]}'
    assert view["json"] == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert view["hex"].startswith("7b 22 61 22")
    assert (view["size"], view["truncated"]) == (13, False)


def test_plain_words_and_numbers_are_not_shown_as_json():
    assert bytes_view(b"42")["json"] is None
    assert bytes_view(b"hello")["json"] is None
    assert bytes_view(b"{not json")["json"] is None


def test_null_and_undecodable_bytes():
    assert bytes_view(None) == {"size": None, "text": None, "json": None, "hex": None, "truncated": False}
    view = bytes_view(b"\xff\x00a")
    assert view["text"] == "\ufffd\x00a"
    assert view["hex"] == "ff 00 61"


def test_a_large_value_is_cut(monkeypatch):
    monkeypatch.setattr(message_browser, "SHOWN_BYTES", 4)
    view = bytes_view(b'["abcdef"]')
    assert (view["text"], view["hex"], view["json"], view["truncated"], view["size"]) == \
        ('["ab', "5b 22 61 62", None, True, 10)
