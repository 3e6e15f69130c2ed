"""Settling a generation's cost once its terminal state is written: the one way every upstream
call (an answer, a title, a read aloud, an embedding, the sweep's later rounds, and any new kind)
does it.

`settle` looks the generation up in the gateway's records when its cost is still `pending`,
settles it on the records thread (`costing.settle_cost_now`), and pushes the user's new spend to
their tabs when the spend changed: at once when the stream reported the cost, after the look-up
when it settled. A pending cost is in no total (`costs/spend.py`), so a round that leaves it
pending pushes nothing. Nothing here raises: the terminal state is saved, and a cost left
pending is the sweep's (`streaming.sweep.reconcile_pending`) a minute later.

A new kind of upstream call (a transcription) writes its terminal state with a `FinalState` (its
upstream ID, whether its cost is pending, whether the gateway keeps a record:
`costing.record_expected`) and then awaits `settle(client, generation_pk, user_pk, final)`. It
stands in `costs`, below every package that makes upstream calls (`knowledge` embeds, `streaming`
answers), and settles on the records thread as their final writes do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chatapp.costs import reconcile, spend_push
from chatapp.costs.costing import settle_cost_now
from chatapp.records_thread import on_final_thread

if TYPE_CHECKING:
    from chatapp.costs.costing import Lookup
    from gateway_client import GatewayClient

__all__ = ["FinalState", "settle", "settle_cost"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FinalState:
    """What reconciliation needs to know once the final state is written: whether the cost is
    still `pending`, and whether the gateway keeps a record to ask (`costing.record_expected`)."""

    upstream_id: str
    cost_pending: bool
    record_expected: bool = False


# One reconciliation round on the records thread (see `costing.settle_cost_now`).
settle_cost = on_final_thread(settle_cost_now)


async def settle(
    client: GatewayClient,
    generation_pk: int,
    user_pk: int | None,
    final: FinalState,
    *,
    lookup: Lookup | None = None,
    changed: Callable[[], Awaitable[None]] | None = None,
) -> bool:
    """Settle the cost of `generation_pk`, whose terminal write returned `final`; True when a
    record or a reason settled it now. `lookup`: the gateway's record when the caller has asked
    for it already (a read aloud's status hangs on it). `changed` runs when it settled, before
    the spend push (the worker tells the page to fetch the answer's new cost). `user_pk` None:
    the user was deleted since, and nobody is told."""
    settled = False
    if final.cost_pending:
        try:
            if lookup is None:
                lookup = await reconcile.look_up(
                    client, final.upstream_id, expected=final.record_expected
                )
            settled = (await settle_cost(generation_pk, lookup)).changed
        except Exception:
            logger.exception("Settling the cost of generation %s failed", generation_pk)
            return False
        if settled and changed is not None:
            await changed()
    if user_pk is not None and (settled or not final.cost_pending):
        await spend_push.cost_settled(user_pk)
    return settled
