"""Pages and htmx endpoints. Views that start a generation are async: the worker must run on the
server's event loop, outside any request or consumer.

Every query is scoped to `request.user`, so another user's conversation is a 404. Database work
and template rendering run in one `sync_to_async` call each, so templates never hit the ORM from
the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url, reswap, retarget

from chatapp import records_thread, tools
from chatapp.access import group_policies, rate_limits
from chatapp.access.body_limits import MAX_FORM_BYTES, MAX_MESSAGE_UPLOAD_BYTES, size_words
from chatapp.assistants.new_chat import StartedWith
from chatapp.conversations import knowledge_choice, uploads, user_text
from chatapp.conversations.models import Conversation, Message, Upload
from chatapp.conversations.tree import ShownMessage, in_comparison, shown, shown_path
from chatapp.conversations.turns import (
    Answerer,
    AnswerRunning,
    NewerMessages,
    StartedGeneration,
    TurnError,
    TurnRequest,
    create_continuation,
    create_retry,
)
from chatapp.costs import spend_push, spending_limits
from chatapp.costs.models import Generation
from chatapp.costs.spend import conversation_spend
from chatapp.gateways import image_models
from chatapp.gateways.catalog import (
    GatewayModels,
    catalog,
    listed_models,
    parse_choice,
    takes_images_in,
)
from chatapp.gateways.configs import GatewayConfig, GatewayUnavailable, aconfig_for
from chatapp.middleware import sandboxed
from chatapp.streaming import stopping, sweep, turn_start, worker
from chatapp.transcription.offer import can_transcribe
from chatapp.views import library, prompts
from chatapp.views.answer_settings import new_chat_context
from chatapp.views.new_chat import TEMPORARY_NOTE, assistants_for, new_chat_choice, picker_value

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest


PREFERRED_MODEL = "emulator/chat"
# Why a turn may not start, each in words for the composer's error line.
REFUSALS = (
    TurnError,
    uploads.UploadRefused,
    GatewayUnavailable,
    rate_limits.RateLimited,
    spending_limits.SpendingLimitReached,
    group_policies.ModelNotAllowed,
)


def last_used_model(user: User) -> tuple[int | None, str] | None:
    """The gateway and model of `user`'s most recent chat answer or image generation, by when it
    started: what a new chat preselects. Only what the user asked for counts: not a read aloud
    (its speech model is no picker's) nor a title (written after a first answer, by its own
    model)."""
    return (
        Generation.objects.filter(user=user, kind__in=[Generation.Kind.CHAT, Generation.Kind.IMAGE])
        .order_by("-started_at", "-pk")
        .values_list("gateway_id", "model")
        .first()
    )


def _selected(
    groups: list[GatewayModels],
    conversation: Conversation | None,
    last_used: tuple[int | None, str] | None = None,
) -> str:
    """The picker value to preselect: the conversation's gateway and model (on a new chat, those
    `last_used`), else the preferred model on the default gateway (the first group), else the
    first model listed. A model its gateway no longer lists is passed over."""
    wanted: list[tuple[int | None, str]] = []
    if conversation and conversation.model:
        wanted.append((conversation.gateway_id, conversation.model))
    elif conversation is None and last_used is not None:
        wanted.append(last_used)
    wanted += [(None, settings.LLM_DEFAULT_MODEL), (None, PREFERRED_MODEL)]
    for gateway_pk, model in wanted:
        for index, group in enumerate(groups):
            if (gateway_pk is None and index != 0) or gateway_pk not in (None, group.config.pk):
                continue
            for choice in group.choices:
                if model and choice.model == model:
                    return choice.value
    return next((group.choices[0].value for group in groups if group.choices), "")


def _gateway_of(groups: list[GatewayModels], value: str) -> str:
    """The name of the gateway whose model the picker value `value` is, where the picker offers
    several gateways (with one, it goes unsaid); else ""."""
    if len(groups) < 2:
        return ""
    return next((g.config.name for g in groups for c in g.choices if c.value == value), "")


def _page(
    request: AuthenticatedRequest,
    conversation_pk: int | None,
    groups: list[GatewayModels],
    template: str = "chatapp/chat.html",
    *,
    sidebar: bool = True,
    image_count: int = 1,
) -> HttpResponse:
    conversation = None
    messages: list[ShownMessage] = []
    # The picker offers what the user's groups allow (a start checks it again:
    # `turns.start_generation`).
    groups = group_policies.catalog_for(group_policies.access_for(request.user.pk), groups)
    if conversation_pk is not None:
        conversation = get_object_or_404(Conversation, pk=conversation_pk, user=request.user)
        conversation.user = request.user  # its owner, not read again by what shows it
        messages = shown_path(conversation)  # the branch shown, with each message's versions
    selected = _selected(
        groups, conversation, last_used_model(request.user) if conversation is None else None
    )
    new_chat: dict[str, object] = {}
    if conversation is None:  # its Settings, Assistant list and temporary switch
        assistants = assistants_for(request.user)
        wanted = request.GET.get("assistant", "")  # a Settings page's "Start a chat"
        chosen = next((a for a in assistants if str(a.pk) == wanted), None)
        value = picker_value(chosen) if chosen else ""
        if value and any(c.value == value for group in groups for c in group.choices):
            selected = value
        new_chat = {
            **new_chat_context(request.user, selected, chosen),
            "assistants": assistants,
            "chosen_assistant": chosen,
        }
    context = {
        "conversation": conversation,
        "sidebar": library.sidebar(request.user, conversation_pk) if sidebar else None,
        "chat_messages": messages,
        # Full pages only: a new conversation has spent nothing yet (and its answer's fragment
        # brings the running total once there is one).
        "conversation_spend": conversation_spend(conversation.pk)
        if conversation and sidebar
        else None,
        **spend_push.spend_context(request.user, month=sidebar),
        "model_groups": groups,
        "selected_model": selected,
        "selected_gateway": _gateway_of(groups, selected),
        # A new chat's Settings, beside its composer, and whether any tool can be turned on.
        **new_chat,
        "temporary_note": TEMPORARY_NOTE,
        "prompt_menu": prompts.menu_data(request.user),  # the composer's "/" menu
        "tools_offered": bool(tools.choosable(request.user.pk)),
        "image_counts": image_models.IMAGE_COUNTS,
        "image_count": image_count,  # the composer's, kept when a new conversation swaps in
        "stall_notice_ms": round(settings.CHAT_STALL_NOTICE * 1000),
        "upload_limits": uploads.LIMITS_IN_WORDS,
        # The composer's microphone, where a gateway transcribes (`transcription.offer`).
        "voice_input": {
            "max_seconds": round(settings.CHAT_VOICE_MAX_SECONDS),
            "max_bytes": settings.CHAT_VOICE_MAX_BYTES,
        }
        if can_transcribe()
        else None,
    }
    return render(request, template, context)


@login_required
@require_GET
async def home(request: AuthenticatedRequest) -> HttpResponse:
    sweep.ensure_sweeper()
    return await sync_to_async(_page)(request, None, await catalog())


def _in_use(user: User, pk: int) -> tuple[int | None, str] | None:
    """The gateway and model conversation `pk` uses: its picker offers them even where they are
    left out of others' (a model listed for titles only, `catalog`)."""
    return Conversation.objects.filter(pk=pk, user=user).values_list("gateway_id", "model").first()


@login_required
@require_GET
async def conversation_page(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    sweep.ensure_sweeper()
    in_use = await sync_to_async(_in_use)(request.user, pk)
    return await sync_to_async(_page)(request, pk, await catalog(in_use))


def composer_error(request: HttpRequest, refused: BaseException) -> HttpResponse:
    # A refusal because an answer is running holds only until it ends: the page clears it then.
    context = {"error": str(refused), "until_done": isinstance(refused, AnswerRunning)}
    response = render(request, "chatapp/_composer_error.html", context)
    return reswap(retarget(response, "#composer-error"), "innerHTML")


def newer_messages(request: HttpRequest, pk: int, refused: NewerMessages) -> HttpResponse:
    """The composer's error line, with the branch the page showed brought up to date (out of
    band): the page then follows on from its new end."""
    conversation = get_object_or_404(Conversation, pk=pk, user=request.user)
    context = {
        "error": str(refused),
        "chat_messages": shown_path(conversation, leaf_pk=refused.leaf_pk),
    }
    response = render(request, "chatapp/_newer_messages.html", context)
    return reswap(retarget(response, "#composer-error"), "innerHTML")


def _render_turn(request: HttpRequest, started: StartedGeneration) -> HttpResponse:
    """The branch from the turn's first new message down to its answer (which the page puts in
    place of the message it redoes and what followed, or after the last message for a follow-up).
    Read back, not reused: the worker may already have flushed text and a `seq`."""
    first = started.user_message or started.assistant
    path = shown_path(started.conversation, leaf_pk=started.assistant.pk, since_pk=first.pk)
    return render(request, "chatapp/_messages.html", {"chat_messages": path})


def posted_after(request: HttpRequest) -> int | None:
    """The last message the page shows, which a follow-up comes after (None: not said)."""
    after = request.POST.get("after", "")
    return int(after) if after.isdigit() else None


async def chosen_model(value: str) -> tuple[GatewayConfig, str]:
    """The picker's value → the gateway to use and the model on it."""
    gateway_pk, model = parse_choice(value)
    return await aconfig_for(gateway_pk), model


async def answerer_for(request: HttpRequest, config: GatewayConfig, model: str) -> Answerer:
    """`model` on `config`, with what it makes of a turn (an image generation for an image
    model, else a chat answer) and how many images the composer asks for."""
    listed = await listed_models(config, model)  # the catalog, asked once for the send
    return Answerer(
        gateway=config,
        model=model,
        kind=(
            Generation.Kind.IMAGE
            if image_models.makes_images(config, model, listed)
            else Generation.Kind.CHAT
        ),
        image_count=image_models.image_count(request.POST.get("images", "")),
        takes_images=takes_images_in(config, model, listed),
    )


def _answer_model(user: User, pk: int) -> tuple[int | None, str] | None:
    return (
        Generation.objects.filter(message_id=pk, user=user)
        .values_list("gateway_id", "model")
        .first()
    )


async def check_answer_model(user: User, pk: int) -> None:
    """`ModelUnavailable` when the answer `pk`'s model, which a retry or continuation keeps, is
    not one its gateway lists (now, or when it was written: an older answer was not checked)."""
    found = await records_thread.on_record_thread_from_view(_answer_model, user, pk)
    if found is not None:
        await listed_models(await aconfig_for(found[0]), found[1])


def posted_files(request: HttpRequest) -> list[tuple[str, bytes]]:
    """The files posted with a message (`files`), as (name, bytes); `UploadRefused` past the
    caps, judged from the sizes before any file is read."""
    length = request.META.get("CONTENT_LENGTH") or "0"
    if length.isdigit() and int(length) > MAX_MESSAGE_UPLOAD_BYTES + MAX_FORM_BYTES:
        raise uploads.UploadRefused(
            f"This message is too large to send ({size_words(int(length))}): a "
            f"message's files may be at most {MAX_MESSAGE_UPLOAD_BYTES // 2**20} MB in all."
        )
    files = request.FILES.getlist("files")
    uploads.check_sizes([(file.name or "", file.size or 0) for file in files])
    return [(file.name or "", file.read(uploads.MAX_UPLOAD_BYTES + 1)) for file in files]


def _check_may_start(user: User, config: GatewayConfig) -> None:
    """`RateLimited` or `SpendingLimitReached` for a user who could start no answer on `config`
    now, whatever the message (the turn checks again, with its cost, when it is made)."""
    rate_limits.check_generation_start(user)
    spending_limits.check_not_used_up(user.pk, config.pk, config.cost_unit)


def _check_attached(attached: list[uploads.CheckedUpload], answerer: Answerer) -> None:
    """`UploadRefused` for files the chosen model cannot be sent."""
    if not attached:
        return
    if answerer.kind == Generation.Kind.IMAGE:
        raise uploads.UploadRefused(
            "An image model draws from the text alone: remove the files, or choose a chat model."
        )
    image = next((upload for upload in attached if upload.kind == Upload.Kind.IMAGE), None)
    if image is not None and not answerer.takes_images:
        raise uploads.UploadRefused(
            f"{answerer.model} does not take images ({image.filename}): choose a model that "
            "does, or remove the image."
        )


@login_required
@require_POST
async def send_message(request: AuthenticatedRequest, pk: int | None = None) -> HttpResponse:
    user = await request.auser()
    try:
        posted = await sync_to_async(posted_files)(request)  # the form is parsed off the loop
        config, model = await chosen_model(request.POST.get("model", ""))
        if posted:  # refused before its files are read: a PDF holds a render process for seconds
            await sync_to_async(_check_may_start)(user, config)
        attached = await uploads.checked_uploads(posted)
        answerer = await answerer_for(request, config, model)
        _check_attached(attached, answerer)
        # A new chat's Settings, chosen beside its composer (None: the user's defaults), and its
        # assistant and whether it is temporary.
        chosen, started_with = (
            await sync_to_async(new_chat_choice)(user, request.POST)
            if pk is None
            else (None, StartedWith())
        )
        # The documents chosen, and the assistant's, are searched once, now, for the passages
        # the context quotes (a turn with passages sends no early request: `turn_start`).
        documents = knowledge_choice.posted(request.POST).with_collections(
            await sync_to_async(knowledge_choice.assistant_collections)(
                user, pk, started_with.assistant_pk
            )
        )
        if answerer.kind != Generation.Kind.CHAT:  # an image is drawn from the text alone
            documents = knowledge_choice.KnowledgeChoice()
        text = request.POST.get("content", "")
        question_ledger: list[int] = []
        passages = await knowledge_choice.passages_for(user, documents, text, pk, question_ledger)
        turn = TurnRequest(
            text=text,
            answerer=answerer,
            conversation_pk=pk,
            after=posted_after(request),
            attached=tuple(attached),
            options=chosen,
            started_with=started_with,
            passages=passages,
        )
        started = await turn_start.start_turn(user, turn)
    except REFUSALS as exc:
        if isinstance(exc, NewerMessages) and pk is not None:
            return await sync_to_async(newer_messages)(request, pk, exc)
        return await sync_to_async(composer_error)(request, exc)
    await knowledge_choice.link_question(
        question_ledger,
        started.conversation.pk,
        started.user_message.pk if started.user_message else None,
    )
    return await turn_response(request, pk, started, answerer.image_count)


async def turn_response(
    request: AuthenticatedRequest, pk: int | None, started: StartedGeneration, images: int = 1
) -> HttpResponse:
    """The page's answer to a message sent: the new conversation (`pk` None) or the new turn."""
    if pk is None:
        url = reverse("chat:conversation", args=[started.conversation.pk])
        if not request.htmx:
            return HttpResponseRedirect(url)
        # The new conversation is swapped into this page: the tab's socket, already open, starts
        # watching it at once, with no page load and no new socket before its first token.
        response = await sync_to_async(_page)(
            request,
            started.conversation.pk,
            await catalog((started.conversation.gateway_id, started.conversation.model)),
            "chatapp/_new_conversation.html",
            sidebar=False,  # the fragment adds the one new entry
            image_count=images,
        )
        return push_url(reswap(retarget(response, "main.chat"), "outerHTML"), url)
    response = await sync_to_async(_render_turn)(request, started)
    return library.moved_to_top(response, started.conversation)  # it is the newest now


async def start_version(
    request: AuthenticatedRequest, create: Callable[[User, str], Awaitable[StartedGeneration]]
) -> HttpResponse:
    """Start the turn `create(user, owner_channel)` makes (a new version of a message) and answer
    with it, or with the composer's error line when it cannot start."""
    user = await request.auser()
    owner_channel = await worker.owner_channel()
    try:
        started = await create(user, owner_channel)
    except REFUSALS as exc:
        return await sync_to_async(composer_error)(request, exc)
    worker.start(started.job)
    response = await sync_to_async(_render_turn)(request, started)
    return library.moved_to_top(response, started.conversation)  # it is the newest now


@login_required
@require_POST
async def retry(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A new version of the answer `pk`, with the model the picker shows (its own if none)."""
    value = request.POST.get("model", "")

    async def create(user: User, owner_channel: str) -> StartedGeneration:
        answerer = None  # the answer's own
        if value:
            answerer = await answerer_for(request, *await chosen_model(value))
        else:
            await check_answer_model(user, pk)
        return await records_thread.on_record_thread_from_view(
            create_retry, user=user, message_pk=pk, owner_channel=owner_channel, answerer=answerer
        )

    return await start_version(request, create)


@login_required
@require_POST
async def continue_answer(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A retry of the answer `pk`, which ran out of its token budget, with a larger budget."""

    async def create(user: User, owner_channel: str) -> StartedGeneration:
        await check_answer_model(user, pk)
        return await records_thread.on_record_thread_from_view(
            create_continuation, user=user, message_pk=pk, owner_channel=owner_channel
        )

    return await start_version(request, create)


@login_required
@require_POST
async def stop(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Stop the generation's turn, in whatever process it runs (`stopping.stop_turn`)."""
    if not await stopping.stop_turn(await request.auser(), pk):
        raise Http404("No such generation.")
    return HttpResponse(status=204)


@login_required
@require_GET
def message_fragment(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    message = get_object_or_404(
        Message.objects.select_related("generation", "conversation"),
        pk=pk,
        conversation__user=request.user,
    )
    # With the conversation's running total, which this answer's cost (just settled, perhaps)
    # changes. Not the month's: that query spans all the user's answers, and every answer's end
    # fetches this fragment (at 200 answers ending together it was most of the database's time);
    # the sidebar's month total is rendered with each page.
    comparing = in_comparison(message)  # shown side by side, without versions until chosen
    context = {
        "message": message,
        "versions": None if comparing else shown(message).versions,
        "in_comparison": comparing,
        "conversation_spend": conversation_spend(message.conversation_id),
    }
    return render(request, "chatapp/_message_fragment.html", context)


@login_required
@require_GET
def message_source(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A message's text as written (the model's markdown), for the answer's Copy button."""
    message = get_object_or_404(Message, pk=pk, conversation__user=request.user)
    response = HttpResponse(message.content, content_type="text/plain; charset=utf-8")
    return sandboxed(response)


@login_required
@require_POST
def rename(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    conversation = get_object_or_404(Conversation, pk=pk, user=request.user)
    title = user_text.one_line(request.POST.get("title", ""))[:200]
    if title:
        conversation.title = title
        conversation.title_source = Conversation.TitleSource.USER  # no model's title replaces it
        conversation.save(update_fields=["title", "title_source", "updated_at"])
    if not request.htmx:
        return HttpResponseRedirect(reverse("chat:conversation", args=[pk]))
    # From the sidebar, the page may show another conversation: its title and tab title stay.
    shown_pk = library.shown_conversation(request)
    context = {
        "conversation": conversation,
        "sidebar": library.sidebar(request.user, shown_pk),
    }
    return render(request, "chatapp/_renamed.html", context)
