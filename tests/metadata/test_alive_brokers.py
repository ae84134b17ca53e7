"""`AliveBrokers`: the registrations clients are told of follow the controller's live list."""

from __future__ import annotations

from odradek.metadata.alive_brokers import AliveBrokers

REGISTERED = {1: "b1", 2: "b2", 3: "b3"}


def test_every_registration_is_alive_before_the_first_update_metadata():
    assert AliveBrokers().of(REGISTERED) == REGISTERED


def test_a_registration_the_controller_left_out_is_not_alive():
    alive = AliveBrokers()
    assert alive.update([1, 3], receiver=1)
    assert alive.of(REGISTERED) == {1: "b1", 3: "b3"}


def test_the_latest_update_metadata_replaces_the_list():
    alive = AliveBrokers()
    alive.update([1], receiver=1)
    alive.update([1, 2, 3, 4], receiver=1)  # 4 not registered here yet: never invented
    assert alive.of(REGISTERED) == REGISTERED
    alive.update([1], receiver=1)
    assert alive.of(REGISTERED) == {1: "b1"}


def test_a_list_without_the_receiver_is_not_a_controllers_and_is_not_taken():
    alive = AliveBrokers()
    assert not alive.update([2, 3], receiver=1)
    assert alive.of(REGISTERED) == REGISTERED
    alive.update([1, 2], receiver=1)
    assert not alive.update([], receiver=1)
    assert alive.of(REGISTERED) == {1: "b1", 2: "b2"}
