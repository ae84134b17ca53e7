"""``tools/protocol_supplement.py``: its notation, its merge into ``../shared``'s specs, and the
generator's behaviour without ``../shared`` (a fresh clone)."""

from __future__ import annotations

import subprocess
import sys

import protocol_supplement as supplement
import pytest

from tests.conftest import PROTOCOL_DIR, ROOT

GENERATOR = ROOT / "tools" / "generate_protocol.py"
needs_specs = pytest.mark.skipif(not (PROTOCOL_DIR / "messages").is_dir(),
                                 reason=f"Kafka's message specs are not at {PROTOCOL_DIR}")


def test_field_lines_nest_by_indentation():
    fields = supplement.parse_fields([
        "A []S 0+",
        "  B int32 1+ default=-1",
        "  C string 0+ nullable=0+ default=null",
        "D int8 2+ tagged=2+ tag=3",
    ])
    assert fields == [
        {"name": "A", "type": "[]S", "versions": "0+", "fields": [
            {"name": "B", "type": "int32", "versions": "1+", "default": "-1"},
            {"name": "C", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null"}]},
        {"name": "D", "type": "int8", "versions": "2+", "taggedVersions": "2+", "tag": 3},
    ]


def test_amend_inserts_after_a_nested_field_and_narrows_versions():
    raw = {"name": "X", "validVersions": "0", "fields": [
        {"name": "Topics", "type": "[]T", "versions": "0+", "fields": [
            {"name": "P", "type": "int32", "versions": "0+"},
            {"name": "Q", "type": "int32", "versions": "0+"}]}]}
    out = supplement.amend(raw, "valid=0-1\nafter Topics.P:\n  N int64 1+\nversions Topics.Q 0\n")
    assert out["validVersions"] == "0-1"
    assert [(f["name"], f["versions"]) for f in out["fields"][0]["fields"]] == [
        ("P", "0+"), ("N", "1+"), ("Q", "0")]
    assert raw["fields"][0]["fields"][1]["versions"] == "0+"  # the input is left alone


def test_amend_refuses_a_path_the_spec_lacks():
    raw = {"name": "X", "validVersions": "0", "fields": [{"name": "A", "type": "int32", "versions": "0+"}]}
    with pytest.raises(KeyError, match="X has no field B"):
        supplement.amend(raw, "after B:\n  C int32 1+\n")


def test_apply_refuses_changes_to_specs_that_are_not_there():
    with pytest.raises(ValueError, match="ShareFetchRequest"):
        supplement.apply({})


def test_without_shared_specs_the_generator_says_so_and_writes_nothing(tmp_path):
    """A fresh clone has no ../shared: the generator exits 2 (scripts/test.sh skips the check)."""
    for args in (["--check"], []):
        result = subprocess.run([sys.executable, str(GENERATOR), *args, "--protocol-dir", str(tmp_path)],
                                capture_output=True, text=True)
        assert result.returncode == 2
        assert "no Kafka message specs" in result.stdout
    assert list(tmp_path.iterdir()) == []


@needs_specs
def test_committed_codec_depends_on_the_supplement(monkeypatch):
    """Drop one field from the supplement and the generated ShareFetch module is no longer
    the committed one: ``--check`` guards the supplement's facts too."""
    import generate_protocol

    committed = (ROOT / "odradek" / "protocol" / "generated" / "share_fetch_request.py").read_text()
    files, _ = generate_protocol.generate(PROTOCOL_DIR)
    assert files["share_fetch_request.py"] == committed
    broken = supplement.CHANGES["ShareFetchRequest"].replace("  BatchSize int32 1+\n", "")
    monkeypatch.setitem(supplement.CHANGES, "ShareFetchRequest", broken)
    files, _ = generate_protocol.generate(PROTOCOL_DIR)
    assert files["share_fetch_request.py"] != committed
