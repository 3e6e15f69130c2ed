"""The websocket's budget and command parsing (the socket-level behaviour is tested over Daphne
in tests/security/test_websocket_input.py)."""

from __future__ import annotations

import pytest

from chatapp.ws.message_limits import ID_FIELDS, BadCommand, MessageBudget, parse_command


def test_a_burst_passes_then_the_rate_holds() -> None:
    budget = MessageBudget(rate=10, burst=3)
    assert [budget.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert budget.take(0.05) is False  # half a token back
    assert budget.take(0.1) is True
    assert budget.take(0.1) is False


def test_refusals_add_up_until_the_sender_is_quiet_long_enough_to_refill() -> None:
    budget = MessageBudget(rate=10, burst=2)
    for now in (0.0, 0.0, 0.0, 0.01, 0.1, 0.1):
        budget.take(now)
    assert budget.refused == 3  # the take at 0.1 let one through without clearing them
    assert budget.take(1.0) is True
    assert budget.refused == 0


@pytest.mark.parametrize(("kind", "field"), list(ID_FIELDS.items()))
def test_each_command_names_a_positive_integer_id(kind: str, field: str) -> None:
    assert parse_command(f'{{"t": "{kind}", "{field}": 7}}') == (kind, 7)
    for bad in ('"7"', "0", "true", "7.0", str(2**63)):
        with pytest.raises(BadCommand, match=f"`{field}` must be a positive integer ID."):
            parse_command(f'{{"t": "{kind}", "{field}": {bad}}}')


def test_a_binary_frame_is_refused() -> None:
    with pytest.raises(BadCommand, match="Binary messages are not accepted"):
        parse_command(None)
