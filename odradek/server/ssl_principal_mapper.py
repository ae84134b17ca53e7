"""``ssl.principal.mapping.rules``: the principal name made of a client certificate's subject.

Kafka's ``SslPrincipalMapper``. The setting is a comma-separated list of rules, tried in order;
the first that applies gives the name:

- ``DEFAULT``: the distinguished name itself, as RFC 2253 writes it (most specific attribute
  first: ``CN=alice,OU=Eng,O=Example,C=US``).
- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or
  upper case the result): applies when ``pattern`` (a regular expression) matches the whole
  name, which it then replaces with ``replacement``, where ``$1``... are the pattern's groups.
  A ``/`` inside the pattern or the replacement is written ``\\/``.

Example: ``RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`` maps
``CN=Duke,OU=ServiceUsers,O=Org,C=US`` to ``duke`` and any other subject to itself. A name that no
rule applies to is an error (``NoMatchingRule``): the connection's authentication fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# Kafka's RULE_PATTERN, group for group: 1 DEFAULT, 2 pattern, 4 replacement, 6 [LU]; a rule
# that is neither (group 7) is empty and ignored, or rejected when text is left over.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a distinguished name."""


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class SslPrincipalMapper:
    """``SslPrincipalMapper(rules).name(dn)``; a bad rule raises ValueError when built."""

    def __init__(self, rules: str | None = None) -> None:
        self.rules = [_parse(text) for text in _split(DEFAULT_RULES if rules is None else rules)]
        self.rules = [rule for rule in self.rules if rule is not None]

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {distinguished_name!r}")


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip())]  # empty ones parse to None


def _parse(text: str) -> _Rule | None:
    m = _PARSER.match(text)
    if m is None or m.end() != len(text):
        unmatched = text[m.end():] if m else text
        raise ValueError(f"ssl.principal.mapping.rules: invalid rule {text!r}, unmatched {unmatched!r}")
    if m.group(1) is not None:
        return _Rule(True)
    if m.group(2) is None:
        return None  # an empty rule (",,")
    try:
        pattern = re.compile(m.group(2))
    except re.error as e:
        raise ValueError(f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {e}") from None
    return _Rule(False, pattern, _replacement(m.group(4), pattern.groups), m.group(6) or "")


def _replacement(java: str, groups: int) -> str:
    """A Java ``replaceAll`` replacement in Python's ``re.sub`` syntax. As in Kafka, ``$12``
    with fewer than 12 groups is group 1 followed by ``2``, and a reference to a group the
    pattern does not have is the literal text."""
    out, pos = [], 0
    for m in _BACK_REFERENCE.finditer(java):
        out.append(_literal(java[pos:m.start()]))
        digits = m.group(1)
        index, rest = digits, ""
        while int(index) > groups and len(index) > 1:
            index, rest = index[:-1], index[-1] + rest
        if int(index) > groups or digits.startswith("0") and groups == 0:
            out.append(_literal(m.group(0)))
        else:
            out.append(f"\\g<{int(index)}>" + _literal(rest))
        pos = m.end()
    out.append(_literal(java[pos:]))
    return "".join(out)


def _literal(text: str) -> str:
    """Java replacement text without references: ``\\x`` is ``x``; escaped for ``re.sub``."""
    return re.sub(r"\\(.)", r"\1", text).replace("\\", "\\\\")
