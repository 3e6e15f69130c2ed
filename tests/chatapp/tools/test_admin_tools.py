"""The tool switches in the admin: every built-in tool listed, on until an admin turns it off, and
a tool turned off is no longer offered to anyone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp import tools
from chatapp.tools.models import ToolSwitch

pytestmark = [pytest.mark.django_db]

CHANGELIST = "admin:chatapp_toolswitch_changelist"


@pytest.fixture
def admin_client_of(django_user_model: Any) -> Client:
    admin = django_user_model.objects.create_superuser("root", password="x")
    client = Client()
    client.force_login(admin)
    return client


def offered_names() -> list[str]:
    return [tool.name for tool in tools.offered(tools.registry(), None)]


def test_the_list_shows_every_registry_tool_on(admin_client_of: Client) -> None:
    assert not ToolSwitch.objects.exists()
    page = admin_client_of.get(reverse(CHANGELIST)).text
    assert sorted(ToolSwitch.objects.values_list("name", flat=True)) == sorted(tools.registry())
    assert all(ToolSwitch.objects.values_list("enabled", flat=True))
    for tool in tools.registry().values():
        assert f'<td class="field-title">{tool.title}</td>' in page
    assert (
        len(re.findall(r'<input type="checkbox" name="form-\d+-enabled"[^>]* checked', page)) == 3
    )
    assert reverse("admin:chatapp_toolswitch_add") not in page, "the tools are the registry's"


def test_unticking_a_tool_in_the_list_stops_offering_it(admin_client_of: Client) -> None:
    admin_client_of.get(reverse(CHANGELIST))
    rows = list(ToolSwitch.objects.order_by("name"))
    form: dict[str, str] = {
        "form-TOTAL_FORMS": str(len(rows)),
        "form-INITIAL_FORMS": str(len(rows)),
        "_save": "Save",
    }
    for number, row in enumerate(rows):
        form[f"form-{number}-id"] = str(row.pk)
        if row.name != "calculator":
            form[f"form-{number}-enabled"] = "on"
    response = admin_client_of.post(reverse(CHANGELIST), form)
    assert response.status_code == 302
    assert not ToolSwitch.objects.get(name="calculator").enabled
    assert offered_names() == ["current_time", "search_conversations"]


def test_the_actions_turn_tools_off_and_on(admin_client_of: Client) -> None:
    admin_client_of.get(reverse(CHANGELIST))
    clock = ToolSwitch.objects.get(name="current_time")
    selected = {"action": "turn_off", "_selected_action": [str(clock.pk)]}
    assert admin_client_of.post(reverse(CHANGELIST), selected).status_code == 302
    assert offered_names() == ["calculator", "search_conversations"]
    selected["action"] = "turn_on"
    admin_client_of.post(reverse(CHANGELIST), selected)
    assert offered_names() == list(tools.registry())


def test_a_switch_left_from_a_tool_no_longer_built_in_says_so(admin_client_of: Client) -> None:
    ToolSwitch.objects.create(name="web_browser", enabled=False)
    page = admin_client_of.get(reverse(CHANGELIST)).text
    assert '<td class="field-title">(no longer built in)</td>' in page


def test_the_admin_index_names_each_model_in_its_plural(admin_client_of: Client) -> None:
    page = admin_client_of.get(reverse("admin:index")).content.decode()
    names = re.findall(r'<th scope="row"[^>]*>\s*<a href="[^"]*"[^>]*>([^<]+)</a>', page)
    assert "Chat defaults" in names
    assert "Tool switches" in names
    assert not [name for name in names if name.endswith(("ss", "chs"))], names


def test_the_actions_reach_what_pages_keep(admin_client_of: Client) -> None:
    """An action updates the rows without saving each (no signal): pages' kept tools
    (`shared_cache`) must still be read again."""
    admin_client_of.get(reverse(CHANGELIST))
    assert "current_time" in {tool.name for tool in tools.choosable(None)}
    clock = ToolSwitch.objects.get(name="current_time")
    selected = {"action": "turn_off", "_selected_action": [str(clock.pk)]}
    assert admin_client_of.post(reverse(CHANGELIST), selected).status_code == 302
    assert "current_time" not in {tool.name for tool in tools.choosable(None)}
    selected["action"] = "turn_on"
    admin_client_of.post(reverse(CHANGELIST), selected)
    assert "current_time" in {tool.name for tool in tools.choosable(None)}
