"""Leases are measured on a clock that counts the time a host is suspended."""

from __future__ import annotations

import time

from sparkpoint.ha.clock import lease_clock
from sparkpoint.ha.leadership import Leadership


def test_the_lease_clock_is_boottime_on_linux() -> None:
    boottime = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert boottime <= lease_clock() <= time.clock_gettime(time.CLOCK_BOOTTIME)


def test_a_lease_deadline_is_read_on_the_lease_clock() -> None:
    # A deadline set on the lease clock, as the election sets it after a renewal: a
    # moment in the past on that clock means the leader may no longer act, whatever the
    # monotonic clock (which stops during a suspend) would say.
    lead = Leadership(epoch=3, instance_id="r0")
    lead._set_lease_deadline(lease_clock() + 60)
    assert lead.can_act()
    lead._set_lease_deadline(lease_clock() - 0.001)
    assert not lead.can_act()
