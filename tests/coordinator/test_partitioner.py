from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.partitioner import java_string_hash, partition_for


def test_known_java_hash_codes():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    # outside the BMP a character counts as its two UTF-16 surrogates: 0xD83D, 0xDE00
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_integer_min_value_maps_to_partition_zero():
    assert [partition_for("polygenelubricants", n) for n in (1, 7, 50)] == [0, 0, 0]


def test_negative_hash_is_made_positive_before_the_modulo():
    h = java_string_hash("my-group")
    assert h < 0
    assert partition_for("my-group", 50) == (-h) % 50


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_in_range_and_stable(group, n):
    p = partition_for(group, n)
    assert 0 <= p < n and p == partition_for(group, n)


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)), max_size=30))
def test_matches_the_textbook_definition_on_the_bmp(text):
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) % 2**32
    assert java_string_hash(text) == (h - 2**32 if h >= 2**31 else h)
