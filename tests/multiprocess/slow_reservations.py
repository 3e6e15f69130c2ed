"""A hook for the servers `test_spending_limits.py` starts: with `TEST_SLOW_RESERVATION` set
(seconds), reading what a limit has used takes that much longer, so the checks of the two
processes overlap for certain. Without the limits' row locks both would read the same spend
and both start; with them the second waits for the first to commit and reads its reservation.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.apps import AppConfig


class SlowReservations(AppConfig):
    name = "tests.multiprocess"
    label = "slow_reservations"

    def ready(self) -> None:
        seconds = float(os.environ.get("TEST_SLOW_RESERVATION", "0"))
        if not seconds:
            return
        from chatapp.costs import spending_limits

        used_by = spending_limits._used

        def slow(*args: Any) -> Any:
            used = used_by(*args)
            time.sleep(seconds)  # on the records thread, as the real query would
            return used

        spending_limits._used = slow
