"""Data migrations, run on rows written in the schema before them, forwards and back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor

BEFORE_IMAGE_URL = [("chatapp", "0010_spending_limits")]
IMAGE_URL = [("chatapp", "0011_image_url_attachments")]


def migrated(target: list[tuple[str, str]]) -> Any:
    """The apps at `target`, once the database is migrated there."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


@pytest.fixture
def at_latest() -> Iterator[None]:
    """Whatever the test migrates to, the database is back at the newest migration after it."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("at_latest")
def test_an_image_kept_as_its_url_is_tagged_image_url_and_back() -> None:
    old = migrated(BEFORE_IMAGE_URL)
    user = old.get_model("auth", "User").objects.create(username="alice")
    conversation = old.get_model("chatapp", "Conversation").objects.create(user=user)
    messages = old.get_model("chatapp", "Message").objects
    url_image = {"kind": "image", "url": "data:image/png;base64,iVBORw0KGgo="}
    kept_image = {"kind": "image", "media_type": "image/png", "filename": "image-1.png",
                  "data": "iVBORw0KGgo=", "preview": False}  # fmt: skip
    note = {"kind": "note", "text": "Image 2 was not kept: it is SVG."}
    answer = messages.create(
        conversation=conversation, role="assistant", attachments=[url_image, kept_image, note]
    )
    remote = messages.create(
        conversation=conversation,
        role="assistant",
        attachments=[{"kind": "image", "url": "https://cdn.example/a.png"}],
    )
    plain = messages.create(conversation=conversation, role="user", content="hi")

    new = migrated(IMAGE_URL).get_model("chatapp", "Message").objects
    assert new.get(pk=answer.pk).attachments == [
        {**url_image, "kind": "image_url"},
        kept_image,
        note,
    ]
    assert new.get(pk=remote.pk).attachments == [
        {"kind": "image_url", "url": "https://cdn.example/a.png"}
    ]
    assert new.get(pk=plain.pk).attachments == []

    back = migrated(BEFORE_IMAGE_URL).get_model("chatapp", "Message").objects
    assert back.get(pk=answer.pk).attachments == [url_image, kept_image, note]
    assert back.get(pk=remote.pk).attachments == [
        {"kind": "image", "url": "https://cdn.example/a.png"}
    ]


BEFORE_READ_ALOUD_NAMES = [("chatapp", "0011_image_url_attachments")]
READ_ALOUD_NAMES = [("chatapp", "0012_read_aloud_names")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("at_latest")
def test_a_read_alouds_audio_survives_its_models_rename() -> None:
    old = migrated(BEFORE_READ_ALOUD_NAMES)
    user = old.get_model("auth", "User").objects.create(username="alice")
    conversation = old.get_model("chatapp", "Conversation").objects.create(user=user)
    answer = old.get_model("chatapp", "Message").objects.create(
        conversation=conversation, role="assistant", content="Otters hold hands."
    )
    generation = old.get_model("chatapp", "Generation").objects.create(
        kind="speech", read_aloud=answer, conversation=conversation, model="emulator/audio"
    )
    old.get_model("chatapp", "SpeechAudio").objects.create(
        generation=generation, media_type="audio/wav", data=b"RIFF"
    )

    new = migrated(READ_ALOUD_NAMES)
    audio = new.get_model("chatapp", "ReadAloudAudio").objects.get()
    assert (audio.generation_id, audio.media_type, bytes(audio.data)) == (
        generation.pk,
        "audio/wav",
        b"RIFF",
    )
    read_aloud = new.get_model("chatapp", "Message").objects.get(pk=answer.pk).read_alouds.get()
    assert (read_aloud.pk, read_aloud.kind) == (generation.pk, "speech")


BEFORE_SELF_SIGN_UPS = [("chatapp", "0025_assistants_and_prompts")]
SELF_SIGN_UPS = [("chatapp", "0026_self_sign_ups")]
USERNAMES_IGNORING_CASE = [("chatapp", "0027_usernames_unique_ignoring_case")]

BEFORE_EMULATOR_NAME = [("chatapp", "0027_usernames_unique_ignoring_case")]
EMULATOR_NAME = [("chatapp", "0028_emulator_gateway_named_by_its_dialect")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("at_latest")
def test_an_account_waiting_for_approval_is_known_as_self_signed_up() -> None:
    old = migrated(BEFORE_SELF_SIGN_UPS)
    users = old.get_model("auth", "User").objects
    waiting = users.create(username="hopeful", is_active=False)
    old.get_model("chatapp", "PendingApproval").objects.create(user=waiting)
    users.create(username="by-admin")
    new = migrated(SELF_SIGN_UPS).get_model("chatapp", "SelfSignUp").objects
    assert list(new.values_list("user__username", flat=True)) == ["hopeful"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("at_latest")
def test_usernames_that_differ_only_by_case_stop_the_migration_saying_which() -> None:
    old = migrated(SELF_SIGN_UPS)
    users = old.get_model("auth", "User").objects
    users.create(username="casey")
    users.create(username="Casey")
    with pytest.raises(RuntimeError, match=r"differ only by case: (casey, Casey|Casey, casey)"):
        migrated(USERNAMES_IGNORING_CASE)
    users.filter(username="Casey").update(username="casey-2")
    migrated(USERNAMES_IGNORING_CASE)
    with pytest.raises(IntegrityError):
        users.create(username="CASEY")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("at_latest")
def test_the_emulators_default_gateway_is_named_by_its_dialect_and_back() -> None:
    old = migrated(BEFORE_EMULATOR_NAME).get_model("chatapp", "Gateway").objects
    row = old.create(name="Emulator", base_url="/numes/api/v1", dialect="numes", emulated=True)
    new = migrated(EMULATOR_NAME).get_model("chatapp", "Gateway").objects
    assert new.get(pk=row.pk).name == "Emulator (Numes)"
    back = migrated(BEFORE_EMULATOR_NAME).get_model("chatapp", "Gateway").objects
    assert back.get(pk=row.pk).name == "Emulator"
    # A row an admin named so already keeps its name, and the emulator's keeps its own.
    admins = back.create(name="Emulator (Numes)", base_url="https://llm.example/v1")
    migrated(EMULATOR_NAME)
    assert [row.name for row in back.order_by("pk")] == ["Emulator", "Emulator (Numes)"]
    assert back.get(pk=admins.pk).base_url == "https://llm.example/v1"
