"""group_descriptions.py with a scripted admin client: which API describes which group, a
group that changes type between ConsumerGroupDescribe and DescribeGroups (KIP-848's online
upgrade), and one group's refusal kept to that group in the list."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client.admin_consumer_groups import ConsumerGroupDescription
from odradek.client.admin_types import GroupDescription, GroupListing
from odradek.client.errors import BrokerError
from odradek.console.group_descriptions import describe_group, describe_listed, group_type
from odradek.protocol.generated.error_codes import ErrorCode

MODERN = ConsumerGroupDescription("g", "Stable", "uniform", 3, 3)
CLASSIC = GroupDescription("g", "Stable", "consumer", "range")


class ScriptedAdmin:
    """Answers each ConsumerGroupDescribe / DescribeGroups from its script (a list per API, one
    answer per call, in order: a description, None, or an ErrorCode to raise) and logs the
    calls as ("modern" | "classic", group_id)."""

    def __init__(self, modern=(), classic=()) -> None:
        self.script = {"modern": list(modern), "classic": list(classic)}
        self.calls: list[tuple[str, str]] = []

    def _answer(self, api: str, group_id: str):
        self.calls.append((api, group_id))
        answer = self.script[api].pop(0)
        if isinstance(answer, ErrorCode):
            raise BrokerError(answer, subject=group_id)
        return {group_id: answer}

    async def describe_consumer_groups(self, ids):
        [group_id] = ids
        return self._answer("modern", group_id)

    async def describe_groups(self, ids):
        [group_id] = ids
        return self._answer("classic", group_id)


def test_consumer_group_described_by_consumer_group_describe_only():
    admin = ScriptedAdmin(modern=[MODERN])
    assert asyncio.run(describe_group(admin, "g")) is MODERN
    assert admin.calls == [("modern", "g")]


def test_classic_group_falls_back_to_describe_groups():
    admin = ScriptedAdmin(modern=[None], classic=[CLASSIC])
    assert asyncio.run(describe_group(admin, "g")) is CLASSIC
    assert group_type(CLASSIC) == "classic" and group_type(MODERN) == "consumer"


def test_a_group_upgraded_between_the_two_questions_is_described_as_it_now_is():
    admin = ScriptedAdmin(modern=[None, MODERN], classic=[ErrorCode.GROUP_ID_NOT_FOUND])
    assert asyncio.run(describe_group(admin, "g")) is MODERN
    assert admin.calls == [("modern", "g"), ("classic", "g"), ("modern", "g")]


def test_a_group_of_neither_type_is_not_found():
    admin = ScriptedAdmin(modern=[None, None], classic=[ErrorCode.GROUP_ID_NOT_FOUND])
    with pytest.raises(BrokerError) as refused:
        asyncio.run(describe_group(admin, "g"))
    assert refused.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_the_list_asks_each_group_by_its_listed_type_and_keeps_refusals_apart():
    listed = [GroupListing("c", "consumer", "Stable", "classic"), GroupListing("m", "consumer", "Stable", "consumer"),
              GroupListing("old", "consumer", "Stable", ""), GroupListing("denied", "consumer", "Stable", "consumer")]
    answers = {"modern": {"m": [MODERN], "old": [None], "denied": [ErrorCode.GROUP_AUTHORIZATION_FAILED]},
               "classic": {"c": [CLASSIC], "old": [CLASSIC]}}

    class PerGroup(ScriptedAdmin):
        def _answer(self, api, group_id):
            self.script[api] = answers[api][group_id]
            return super()._answer(api, group_id)

    admin = PerGroup()
    found = asyncio.run(describe_listed(admin, listed))
    assert (found["c"], found["m"], found["old"]) == (CLASSIC, MODERN, CLASSIC)
    assert isinstance(found["denied"], BrokerError) and found["denied"].code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert ("modern", "c") not in admin.calls  # a group listed classic: DescribeGroups only
    assert ("modern", "old") in admin.calls and ("classic", "old") in admin.calls  # no type listed: both


def test_a_listed_classic_group_upgraded_since_is_described_as_a_consumer_group():
    admin = ScriptedAdmin(modern=[MODERN], classic=[ErrorCode.GROUP_ID_NOT_FOUND])
    found = asyncio.run(describe_listed(admin, [GroupListing("g", "consumer", "Stable", "classic")]))
    assert found == {"g": MODERN}
