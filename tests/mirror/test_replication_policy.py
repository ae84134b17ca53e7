"""The same-cluster refusal and the provenance mark (the clusters themselves: in
test_mirror_maker.py)."""

from odradek.mirror.replication_policy import MIRRORED_FROM, provenance, same_cluster


def test_one_cluster_id_on_both_sides_is_refused():
    assert "same cluster (cluster id abc)" in same_cluster("abc", "abc")
    assert same_cluster("abc", "xyz") is None
    assert same_cluster(None, None) is None  # clusters that give no id cannot be compared


def test_the_mark_names_the_source_cluster():
    assert provenance("abc") == MIRRORED_FROM + "abc"
    assert provenance(None) == ""
