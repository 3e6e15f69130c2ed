"""Another user's data over HTTP, CSRF on every POST, and the admin for non-staff.

The routes are not listed here: they are walked from `chatapp.urls`, so a new route with a `pk`
is checked the day it is added (and one under a new prefix fails until it says what it owns).
Each check has its control: the owner (or a request with the token) gets through, so a refusal
means the check refused it, not that the URL was wrong.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.middleware.csrf import _get_new_csrf_string
from django.test import AsyncClient
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from chatapp.assistants.models import Assistant, Prompt
from chatapp.conversations import shared_links
from chatapp.conversations.models import Conversation, Folder, Message, Upload
from chatapp.costs.models import Generation
from chatapp.knowledge.models import Collection, KnowledgeFile
from chatapp.streaming import worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("closed_clients")]

# What the `pk` of a route names, by the route's prefix.
OWNED_BY = {
    "c/": "conversation",
    "m/": "message",
    "g/": "generation",
    "shared/": "shared link",
    "u/": "upload",
    "settings/assistants/": "assistant",
    "settings/prompts/": "prompt",
    "folders/": "folder",
    "knowledge/": "collection",
}
POST_DATA = {"content": "hello", "model": "ok", "title": "renamed"}
# As a browser sends it for the page's own fetches (a view may refuse cross-site ones).
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    template: str  # e.g. "m/<int:pk>/attachments/<int:index>/"

    @property
    def owned(self) -> str:
        for prefix, kind in OWNED_BY.items():
            if self.template.startswith(prefix):
                return kind
        raise AssertionError(f"{self.template}: add what its pk names to OWNED_BY")

    def url(self, pk: int | None, token: str = "", file_pk: int = 0) -> str:
        """This route's URL for `pk`, and for a shared link's `token` and a collection's file
        (`file_pk`) where it takes them."""
        kwargs: dict[str, Any] = {"pk": pk} if "<int:pk>" in self.template else {}
        kwargs |= {"file_pk": file_pk} if "<int:file_pk>" in self.template else {}
        kwargs |= {"index": 0} if "<int:index>" in self.template else {}
        kwargs |= {"position": 2} if "<int:position>" in self.template else {}
        kwargs |= {"token": token} if "<str:token>" in self.template else {}
        return reverse(self.name, kwargs=kwargs)


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> list[Route]:
    routes = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if pattern.app_name == "admin":
                continue  # the admin's own checks (staff only) are tested below
            inner = ":".join(filter(None, [namespace, pattern.namespace or ""]))
            routes += _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            routes.append(Route(name, prefix + str(pattern.pattern)))
    return routes


ROUTES = _walk(get_resolver().url_patterns)
WITH_PK = [route for route in ROUTES if "<int:pk>" in route.template]


def test_the_walk_finds_the_routes_it_must() -> None:
    names = {route.name for route in WITH_PK}
    assert {
        "chat:conversation",
        "chat:attachment",
        "chat:stop",
        "chat:export_json",
        "chat:upload",
    } <= names
    assert all(route.owned for route in WITH_PK)


@dataclass(frozen=True, slots=True)
class Owned:
    conversation: int
    question: int
    answer: int
    generation: int
    shared_link: int
    token: str  # the shared link's
    upload: int  # a file attached to the question
    assistant: int  # the victim's own assistant
    prompt: int  # and saved prompt
    folder: int  # the conversation is in it
    collection: int  # the victim's knowledge collection
    knowledge_file: int  # a file in it


def _victims_conversation(user: Any) -> Owned:
    """A finished exchange with an attachment and a read aloud, its answer cut by its budget (so
    Continue works), shared by a link."""
    conversation = Conversation.objects.create(user=user, title="private")
    question = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content="my secret question"
    )
    answer = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        parent=question,
        content="my secret answer",
        attachments=[{"kind": "file", "filename": "a.txt", "data": "c2VjcmV0"}],
    )
    generation = Generation.objects.create(
        message=answer,
        conversation=conversation,
        model="ok",
        status=Generation.Status.COMPLETED,
        finish_reason="length",
        completion_tokens=10,
    )
    Generation.objects.create(  # the answer read aloud once (it failed)
        kind=Generation.Kind.READ_ALOUD,
        read_aloud=answer,
        conversation=conversation,
        model="ok",
        status=Generation.Status.FAILED,
        error_message="my secret reading failed",
    )
    upload = Upload.objects.create(
        message=question,
        position=0,
        kind=Upload.Kind.DOCUMENT,
        filename="secret.txt",
        media_type="text/plain",
        size=6,
        data=b"secret",
        text="secret",
    )
    conversation.current_leaf = answer
    conversation.folder = Folder.objects.create(user=user, name="my secret folder")
    conversation.save()
    shared = shared_links.create(user, conversation.pk, answer.pk)
    assistant = Assistant.objects.create(owner=user, name="secret", system_prompt="my secret")
    prompt = Prompt.objects.create(owner=user, name="secret", text="my secret prompt")
    collection = Collection.objects.create(owner=user, name="secret", description="my secret")
    knowledge_file = KnowledgeFile.objects.create(
        collection=collection,
        name="secret.md",
        content_type="text/markdown",
        size=6,
        sha256="0" * 64,
        data=b"secret",
        state=KnowledgeFile.State.READY,
    )
    return Owned(
        conversation.pk,
        question.pk,
        answer.pk,
        generation.pk,
        shared.link.pk,
        shared.token,
        upload.pk,
        assistant.pk,
        prompt.pk,
        conversation.folder.pk,
        collection.pk,
        knowledge_file.pk,
    )


def _pks(route: Route, owned: Owned) -> list[int]:
    """Every key of the victim's a guesser could put in `route` (message routes: both roles)."""
    match route.owned:
        case "conversation":
            return [owned.conversation]
        case "message":
            return [owned.question, owned.answer]
        case "shared link":
            return [owned.shared_link]
        case "upload":
            return [owned.upload]
        case "assistant":
            return [owned.assistant]
        case "prompt":
            return [owned.prompt]
        case "folder":
            return [owned.folder]
        case "collection":
            return [owned.collection]
        case _:
            return [owned.generation]


def _owners_pk(route: Route, owned: Owned) -> int:
    if route.owned == "message":
        return owned.question if route.name == "chat:edit" else owned.answer
    return _pks(route, owned)[0]


def _owners_url(route: Route, owned: Owned) -> str:
    pk = _owners_pk(route, owned) if "<int:pk>" in route.template else None
    return route.url(pk, owned.token, owned.knowledge_file)


async def _client(user: Any, **options: Any) -> AsyncClient:
    client = AsyncClient(**options)
    await client.aforce_login(user)
    return client


async def _workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


@pytest.mark.parametrize("route", WITH_PK, ids=lambda route: route.name)
async def test_another_users_ids_are_not_found(route: Route, alice: Any, bob: Any) -> None:
    owned = await sync_to_async(_victims_conversation)(alice)
    mallory = await _client(bob)
    for pk in _pks(route, owned):
        responses = [
            await mallory.get(route.url(pk, file_pk=owned.knowledge_file), headers=SAME_ORIGIN),
            await mallory.post(
                route.url(pk, file_pk=owned.knowledge_file), POST_DATA, headers=SAME_ORIGIN
            ),
        ]
        statuses = [response.status_code for response in responses]
        assert set(statuses) <= {404, 405}, (route.template, pk, statuses)
        assert 404 in statuses, (route.template, pk, statuses)
        for response in responses:
            assert b"secret" not in response.content
    # Nothing of the victim's changed: no new message, the title and every row still there.
    conversation = await Conversation.objects.aget(pk=owned.conversation)
    assert conversation.title == "private"
    assert await Message.objects.filter(conversation=conversation).acount() == 2
    assert await sync_to_async(shared_links.live)(owned.token) is not None  # not revoked
    assert await Assistant.objects.filter(pk=owned.assistant, name="secret").aexists()
    assert await Prompt.objects.filter(pk=owned.prompt, name="secret").aexists()
    assert await KnowledgeFile.objects.filter(pk=owned.knowledge_file).aexists()
    assert await Collection.objects.filter(pk=owned.collection, name="secret").aexists()
    # The control: the owner reaches the same URL (an answer is chosen from a comparison).
    if route.name == "chat:choose":
        await Conversation.objects.filter(pk=owned.conversation).aupdate(
            comparing_id=owned.question
        )
    owner = await _client(alice)
    url = route.url(_owners_pk(route, owned), file_pk=owned.knowledge_file)
    response = await owner.get(url, headers=SAME_ORIGIN)
    if response.status_code == 405:
        response = await owner.post(url, POST_DATA, headers={"HX-Request": "true", **SAME_ORIGIN})
    assert response.status_code not in (403, 404, 405), (url, response.status_code)
    await _workers_finished()


# Routes anyone may reach: signing in and out (with a password or through the OpenID Connect
# provider), signing up and the page that says an account waits for approval, what a shared
# link opens (its token the key), and the sandboxed frames that draw a diagram or preview an
# answer's code on a shared page too (they hold no data: the page posts them the code).
PUBLIC = {
    "login",
    "logout",
    "sign_up",
    "pending_approval",
    "oidc_authentication_init",
    "oidc_authentication_callback",
    "chat:shared_page",
    "chat:shared_image",
    "diagram_frame",
    "preview_frame",
}


@pytest.mark.parametrize(
    "route", [route for route in ROUTES if route.name not in PUBLIC], ids=lambda route: route.name
)
async def test_every_route_but_signing_in_and_shared_links_needs_a_sign_in(
    route: Route, alice: Any
) -> None:
    owned = await sync_to_async(_victims_conversation)(alice)
    url = _owners_url(route, owned)
    anonymous = AsyncClient()
    for response in (
        await anonymous.get(url, headers=SAME_ORIGIN),
        await anonymous.post(url, POST_DATA, headers=SAME_ORIGIN),
    ):
        assert response.status_code == 302, (url, response.status_code)
        assert response["Location"].startswith(reverse("login")), url
    # The control: signed in, the same URL is not sent to sign in.
    owner = await _client(alice)
    response = await owner.get(url, headers=SAME_ORIGIN)
    if response.status_code == 405:
        response = await owner.post(url, POST_DATA, headers={"HX-Request": "true", **SAME_ORIGIN})
    assert response.status_code != 302 or not response["Location"].startswith(reverse("login"))
    await _workers_finished()


async def test_a_shared_link_opens_signed_out(alice: Any) -> None:
    owned = await sync_to_async(_victims_conversation)(alice)
    response = await AsyncClient().get(reverse("chat:shared_page", args=[owned.token]))
    assert response.status_code == 200
    assert b"my secret answer" in response.content


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
async def test_every_post_needs_the_csrf_token(route: Route, alice: Any) -> None:
    owned = await sync_to_async(_victims_conversation)(alice)
    client = await _client(alice, enforce_csrf_checks=True)
    url = _owners_url(route, owned)
    response = await client.post(url, POST_DATA)
    assert response.status_code == 403, (url, response.status_code)
    assert b"CSRF" in response.content
    if route.name != "chat:delete":  # the owner's data is unchanged
        assert await Conversation.objects.filter(pk=owned.conversation, title="private").aexists()
    # The control: with the token, the same request is not refused for want of it.
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    response = await client.post(url, POST_DATA, headers={"X-CSRFToken": token})
    assert response.status_code != 403, (url, response.status_code)
    await _workers_finished()


async def test_admin_pages_are_refused_to_non_staff(alice: Any, bob: Any) -> None:
    owned = await sync_to_async(_victims_conversation)(alice)
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
    urls.append(reverse("admin:chatapp_conversation_change", args=[owned.conversation]))
    mallory = await _client(bob)
    for url in urls:
        response = await mallory.get(url)
        assert response.status_code == 302, (url, response.status_code)
        assert response["Location"].startswith(reverse("admin:login")), url
    # The control: a staff user gets the pages.
    bob.is_staff = bob.is_superuser = True
    await bob.asave()
    staff = await _client(bob)
    for url in urls:
        assert (await staff.get(url)).status_code == 200, url


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
async def test_every_response_is_no_store(route: Route, alice: Any) -> None:
    """Signed-in pages, fragments and downloads (attachments, read alouds, exports) are the user's:
    `no-store`, so neither a shared proxy nor the browser's disk cache keeps them."""
    owned = await sync_to_async(_victims_conversation)(alice)
    owner = await _client(alice)
    url = _owners_url(route, owned)
    response = await owner.get(url, headers=SAME_ORIGIN)
    if response.status_code == 405:
        response = await owner.post(url, POST_DATA, headers={"HX-Request": "true", **SAME_ORIGIN})
    assert response.get("Cache-Control") == "no-store", (url, response.status_code)
    await _workers_finished()


async def test_the_admin_and_the_sign_in_page_are_no_store(alice: Any) -> None:
    anonymous = AsyncClient()
    assert (await anonymous.get(reverse("login")))["Cache-Control"] == "no-store"
    alice.is_staff = alice.is_superuser = True
    await alice.asave()
    staff = await _client(alice)
    urls = [reverse("admin:index")] + [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]
    for url in urls:
        response = await staff.get(url)
        assert response.status_code == 200, url
        assert response["Cache-Control"] == "no-store", url
