"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapper reads and applies them (the cases
of Kafka's SslPrincipalMapperTest)."""

from __future__ import annotations

import pytest

from odradek.server.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper, _split

RULES = ",".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize("dn,name", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_rules_apply_in_order(dn, name):
    assert SslPrincipalMapper(RULES).name(dn) == name


def test_default_is_the_distinguished_name():
    assert SslPrincipalMapper(None).name("CN=alice,O=Example") == "CN=alice,O=Example"


def test_escaped_comma_in_a_name():
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_splitting_ignores_spaces_and_empty_rules():
    assert [r for r in _split("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ") if r] == \
        ["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1/", "DEFAULT"]
    assert [r for r in _split(",,RULE://,,,DEFAULT,,") if r] == ["RULE://", "DEFAULT"]


@pytest.mark.parametrize("rules", [
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_no_matching_rule():
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=alice,OU=Eng")


def test_back_references_beyond_the_groups_are_literal():
    # two groups: $12 is group 1 then "2"; $3 stays "$3" (Kafka's escapeLiteralBackReferences)
    mapper = SslPrincipalMapper("RULE:^CN=(\\w+),OU=(\\w+)$/$12-$3-$2/")
    assert mapper.name("CN=alice,OU=Eng") == "alice2-$3-Eng"
