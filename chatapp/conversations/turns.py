"""Creating a turn: the user's message, the assistant's placeholder, its generation record, and
the context sent upstream (the message tree is `tree.py`'s).

A turn that calls tools is a chain of answers, each round's after the one before
(`create_tool_round`). One answer is written per conversation at a time: a turn started while
another streams would read the half-written one as context, so it is refused (the conversation row
is locked while that is checked).

An answer that ran out of its token budget is continued as a retry with a larger one
(`costs/token_budgets.py` says how much larger).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from chatapp.access import group_policies, rate_limits
from chatapp.assistants.new_chat import StartedWith
from chatapp.conversations import knowledge_context, request_options, uploads, user_text
from chatapp.conversations.jobs import Job
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.tree import MessageTree, context_for, context_through
from chatapp.costs import spending_limits
from chatapp.costs.models import Generation
from chatapp.costs.token_budgets import larger_budget
from chatapp.errors import ChatAppError
from chatapp.gateways.catalog import takes_images
from chatapp.gateways.configs import GatewayConfig, config_for
from chatapp.knowledge.passages import Passage

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TITLE_LENGTH = 60
# How much of a line a title is read from: enough for its 60 characters behind markdown's marks
# and a link's address, and no more, so that a 100,000-character line costs no more than a short
# one (stripping the marks of a whole one held the server for seconds, #45).
TITLE_SOURCE = 2_000
MAX_MESSAGE_CHARS = 100_000
BUSY = "An answer is still being written in this conversation; stop it or wait for it to finish."
NEWER = "This conversation has new messages: they are shown now; send again to continue."
IMPORTED_RETRY = "This answer was imported: choose a model below to write a new version with."
IMPORTED_CONTINUE = (
    "This answer was imported, with no token budget to enlarge: regenerate it instead."
)


class TurnError(ChatAppError, ValueError):
    """The user's input cannot start a turn; the message is for the user."""


class AnswerRunning(TurnError):
    """An answer is being written in the conversation: the next turn waits for it (or its Stop).
    Pages clear the refusal once it ends."""


class NewerMessages(TurnError):
    """A follow-up to a message the conversation has gone on from since the page showed it (in
    another tab): sent, it would start a second branch there that nobody asked for. `leaf_pk` is
    the newest message after it, the end of what the page should show instead."""

    def __init__(self, leaf_pk: int) -> None:
        super().__init__(NEWER)
        self.leaf_pk = leaf_pk


@dataclass(frozen=True, slots=True, kw_only=True)
class Answerer:
    """Who answers a turn and what it makes: `model` on `gateway` (None: the default gateway),
    a chat answer or, from an image model, an image generation of `image_count` images
    (`kind`)."""

    model: str
    gateway: GatewayConfig | None = None
    kind: Generation.Kind = Generation.Kind.CHAT
    image_count: int = 1
    takes_images: bool | None = None
    """Whether the model takes images, from the gateway's list read for this send (`kind` is
    from the same list: the catalog is asked once a send); None: from its last list (a retry of
    an answer, a tool round: `catalog.takes_images`)."""

    def sent_images(self, gateway: GatewayConfig) -> bool:
        """Whether images attached in the conversation go to the model with its context."""
        if self.takes_images is not None:
            return self.takes_images
        return takes_images(gateway, self.model)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """A message the user sends, which starts a turn: its `text` and the files `attached` to it,
    answered by `answerer`. A new conversation (`conversation_pk` None) has the settings
    `options` (None: the user's defaults) and is `started_with` an assistant or as a temporary
    chat; a follow-up comes after `after`, the last message the page shows (None: the leaf
    shown). `passages` were retrieved for it from the documents chosen (`knowledge_context`)."""

    text: str
    answerer: Answerer
    conversation_pk: int | None = None
    after: int | None = None
    attached: tuple[uploads.CheckedUpload, ...] = ()
    options: request_options.RequestOptions | None = None
    started_with: StartedWith = field(default_factory=StartedWith)
    passages: tuple[Passage, ...] = ()


@dataclass(frozen=True, slots=True)
class StartedGeneration:
    """One generation just started, the first of a turn or a later round: its rows, the job to run
    it, and the user message it answers when the turn wrote one."""

    conversation: Conversation
    assistant: Message
    generation: Generation
    job: Job
    user_message: Message | None = None


def title_from(text: str) -> str:
    """The first line of `text` with words in it, as a title: without its markdown."""
    lines = (user_text.without_markdown(line[:TITLE_SOURCE]) for line in text.strip().split("\n"))
    first_line = next((line for line in lines if line), "")
    if len(first_line) <= TITLE_LENGTH:
        return first_line
    return first_line[: TITLE_LENGTH - 1].rstrip() + "…"


def idle_conversation(user: User, conversation_pk: int, *, lock: bool = True) -> Conversation:
    """The user's conversation, locked until the transaction ends (unless `lock` is false: a
    read ahead of the turn), if no answer is being written in it (a `TurnError` otherwise)."""
    rows = Conversation.objects.select_for_update() if lock else Conversation.objects
    try:
        conversation = rows.get(pk=conversation_pk, user=user)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None
    # One whose worker died (a crash, a restart) stops beating: it is not waited for, even before
    # the sweep marks it interrupted.
    silent = Generation.silent_since(timezone.now() - timedelta(seconds=settings.CHAT_STALE_AFTER))
    running = conversation.generations.filter(status=Generation.Status.STREAMING).exclude(
        kind__in=Generation.ANSWERLESS_KINDS  # a read aloud, a title: no answer is written
    )
    if running.exclude(silent).exists():
        raise AnswerRunning(BUSY)
    return conversation


def own_message(user: User, message_pk: int, role: str | None = None) -> Message:
    found = Message.objects.select_related("conversation").filter(
        pk=message_pk, conversation__user=user
    )
    message = (found if role is None else found.filter(role=role)).first()
    if message is None:
        raise Http404("No such message.")
    return message


def start_generation(
    conversation: Conversation,
    answerer: Answerer,
    owner_channel: str,
    parent_pk: int | None,
    *,
    user_message: Message | None = None,
    max_tokens: int | None = None,
    tools: tuple[dict[str, Any], ...] | None = None,
    model_allowed: bool = False,
    passages: tuple[Passage, ...] = (),
) -> StartedGeneration:
    """A generation by `answerer` answering `parent_pk` (a user message or, for a new version
    of a tool round's answer or the turn's next round, the answer before it), its answer the
    leaf shown, asked with the conversation's request options (a larger budget of its own wins)
    and `tools` (None: those the options choose; an image generation is offered none), with
    `passages` quoted in its context and cited by its answer. Every path that starts a
    generation comes here. The model is one a person chose, which the user's groups must allow
    (`ModelNotAllowed` otherwise), but for `model_allowed`: the tool loop's next round
    (`create_tool_round`), whose model was allowed when the turn began."""
    gateway = answerer.gateway or config_for(None)
    if not model_allowed:
        group_policies.check_model(conversation.user_id, gateway.name, answerer.model)
    model, kind = answerer.model, answerer.kind
    options = request_options.options_for(conversation)
    if max_tokens is None:
        max_tokens = options.max_tokens
    previous_round = None
    # A tool round's answer is the parent of the next round's; a user message just written
    # (`user_message`) has no generation.
    if parent_pk is not None and user_message is None:
        rounds = Generation.objects.filter(message_id=parent_pk).values_list("tool_round")
        previous_round = rounds.first()
    tool_round = 1 if previous_round is None else previous_round[0] + 1
    if kind == Generation.Kind.IMAGE:
        tools = ()
    elif tools is None:
        dialect = request_options.dialect_of(gateway.pk)
        tools = request_options.upstream_tools(options, dialect, conversation.user_id)
    records = knowledge_context.recorded(passages)
    sources = knowledge_context.citations(records)
    assistant = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        parent_id=parent_pk,
        annotations=sources,
    )
    messages = knowledge_context.with_context(
        context_for(conversation, assistant, images=answerer.sent_images(gateway)), records
    )
    # Before the row exists, under the limits' locks: `SpendingLimitReached` rolls it all back.
    ceiling = spending_limits.ceiling_for(
        gateway.pk, gateway.cost_unit, model, messages, max_tokens, kind
    )
    spend = spending_limits.reserve(conversation.user_id, gateway.pk, ceiling, kind)
    if spend is not None and (max_tokens is None or spend.capped_by):
        # The budget reserved goes upstream, so the gateway holds the answer to it: hidden
        # reasoning is billed but never reaches the worker's check as it streams. A budget a
        # limit cut (`capped_by`) goes up in place of the one asked for.
        max_tokens = spend.ceiling.completion_tokens
    generation = Generation.objects.create(
        message=assistant,
        conversation=conversation,
        gateway_id=gateway.pk,
        model=model,
        max_tokens=max_tokens,
        owner_channel=owner_channel,
        tool_round=tool_round,
        kind=kind,
        spend_ceiling=None if spend is None else spend.reserved,
        budget_capped_by="" if spend is None else spend.capped_by,
        passages=records,
    )
    conversation.gateway_id = gateway.pk
    conversation.model = model
    conversation.current_leaf = assistant
    conversation.comparing = None  # a turn after a comparison goes on from one of its answers
    conversation.save(update_fields=["gateway", "model", "current_leaf", "comparing", "updated_at"])
    job = Job(
        generation_pk=generation.pk,
        message_pk=assistant.pk,
        conversation_pk=conversation.pk,
        gateway=gateway,
        model=model,
        messages=messages,
        owner_channel=owner_channel,
        max_tokens=max_tokens,
        options=options,
        tools=tools,
        tool_round=tool_round,
        user_pk=conversation.user_id,
        kind=kind,
        image_count=answerer.image_count,
        spend=spend,
        sources=tuple(sources),
    )
    return StartedGeneration(conversation, assistant, generation, job, user_message)


def checked_message(text: str, model: str) -> str:
    """The message to send (stripped), or a `TurnError` saying what is wrong with it."""
    text = text.strip()
    if not text:
        raise TurnError("Write a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise TurnError(f"The message is too long (at most {MAX_MESSAGE_CHARS:,} characters).")
    if "\x00" in text:  # PostgreSQL cannot store it
        raise TurnError("The message contains a NUL character (U+0000); remove it and send again.")
    if not model:
        raise TurnError("Choose a model first.")
    return text


def first_context(text: str) -> list[dict[str, Any]]:
    """The context of a new conversation's first answer: what `context_for` gives once stored."""
    return [{"role": "user", "content": text}]


def create_turn(
    user: User,
    turn: TurnRequest,
    owner_channel: str,
    *,
    admission: rate_limits.Admission | None = None,
) -> StartedGeneration:
    """The user's message, with its files, and a generation answering it. A follow-up comes
    after `turn.after` if nothing has come after it since (`NewerMessages`: an edit or a retry
    makes a branch, a follow-up never does). An `admission` (`rate_limits.admit`) is the send's
    own: its request left already."""
    text = checked_message(turn.text, turn.answerer.model)
    if admission is None:  # one held was checked as it was taken, and counts until released
        rate_limits.check_generation_start(user)
    with transaction.atomic():
        parent_pk = None
        if turn.conversation_pk is None:
            values = (
                request_options.defaults_for(user)
                if turn.options is None
                else request_options.row_values(turn.options)
            )
            conversation = Conversation.objects.create(
                user=user, title=title_from(text), **values, **turn.started_with.row_values()
            )
        else:
            conversation = idle_conversation(user, turn.conversation_pk)
            parent_pk = follow_up_parent(conversation, turn.after)
            if not conversation.title:
                conversation.title = title_from(text)
                conversation.save(update_fields=["title"])
        question = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=text, parent_id=parent_pk
        )
        uploads.store(question, turn.attached)
        started = start_generation(
            conversation,
            turn.answerer,
            owner_channel,
            question.pk,
            user_message=question,
            passages=turn.passages,
        )
        if admission is not None:
            admission.record(started.generation.pk)
        return started


def follow_up_parent(conversation: Conversation, after: int | None) -> int | None:
    """The message a follow-up answers to: `after` if nothing came after it since (else
    `NewerMessages`), or the leaf shown when the page did not say. A page showing a comparison
    names its question: the follow-up answers its `default_choice` while none is chosen."""
    if after is None:
        return MessageTree(conversation.pk).shown_leaf(conversation.current_leaf_id)
    role = conversation.messages.filter(pk=after).values_list("role", flat=True).first()
    if role is None:
        raise Http404("No such message.")
    tree = MessageTree(conversation.pk)
    if role == Message.Role.USER:
        answers = tree.children.get(after, [])
        if len(answers) < 2:  # never a comparison's question: a follow-up never comes after it
            raise Http404("No such message.")
        if after != conversation.comparing_id:  # chosen from since (in another tab)
            leaf = tree.shown_leaf(conversation.current_leaf_id)
            raise NewerMessages(
                leaf if leaf and after in tree.path(leaf) else tree.newest_below(after)
            )
        if any(tree.children.get(answer) for answer in answers):
            raise NewerMessages(tree.newest_below(after))
        return default_choice(answers)
    if tree.children.get(after):
        raise NewerMessages(tree.newest_below(after))
    return after


def default_choice(answers: list[int]) -> int:
    """Of a comparison's answers (oldest first: the columns left to right), the one a follow-up
    sent without choosing goes on from: the first that completed, else the first."""
    completed = Generation.objects.filter(
        message_id__in=answers, status=Generation.Status.COMPLETED
    ).values_list("message_id", flat=True)
    return min(completed, default=answers[0])


@dataclass(frozen=True, slots=True)
class EarlyRequest:
    """What a turn's upstream request is sent with, read before its rows are written, and its
    place under the user's answer limit, held until the turn is written (`create_turn`)."""

    messages: list[dict[str, Any]]
    options: request_options.RequestOptions
    tools: tuple[dict[str, Any], ...]
    admission: rate_limits.Admission


def early_request(user: User, turn: TurnRequest) -> EarlyRequest | None:
    """The request `create_turn` will make for `turn`, read ahead (nothing locked, nothing
    written) so that it can leave before the turn's rows are written: a new chat's one message
    with the settings chosen beside it (or the user's defaults) and the tools they choose, as the
    conversation will copy them; a follow-up's context through `turn.after`. `create_turn`'s
    refusals come first, so that a refused one sends nothing, the answer limit last (`admit`:
    the request counts from then on). None when a spending limit applies (the request waits for
    its reservation, made with the turn). `create_turn` checks it all again under its lock: if
    the conversation went on meanwhile, it refuses and the request is closed."""
    answerer = turn.answerer
    gateway = answerer.gateway or config_for(None)
    text = checked_message(turn.text, answerer.model)
    group_policies.check_model(user.pk, gateway.name, answerer.model)  # before anything leaves
    if spending_limits.any_apply(user.pk, gateway.pk):
        return None
    if turn.conversation_pk is None:
        options = turn.options
        if options is None:
            options = request_options.default_options(user)
        messages = first_context(text)
    else:
        conversation = idle_conversation(user, turn.conversation_pk, lock=False)
        parent_pk = follow_up_parent(conversation, turn.after)
        options = request_options.options_for(conversation)
        history = context_through(conversation.pk, parent_pk, images=answerer.sent_images(gateway))
        messages = [*history, {"role": "user", "content": text}]
    tools = request_options.upstream_tools(options, request_options.dialect_of(gateway.pk), user.pk)
    return EarlyRequest(messages, options, tools, rate_limits.admit(user))


def create_edit(
    user: User, message_pk: int, text: str, answerer: Answerer, owner_channel: str
) -> StartedGeneration:
    """A new version of the user's message `message_pk` (its sibling, with `text`) and a
    generation answering it by `answerer`."""
    text = checked_message(text, answerer.model)
    rate_limits.check_generation_start(user)
    with transaction.atomic():
        original = own_message(user, message_pk, Message.Role.USER)
        conversation = idle_conversation(user, original.conversation_id)
        question = Message.objects.create(
            conversation=conversation,
            role=Message.Role.USER,
            content=text,
            parent_id=original.parent_id,
        )
        uploads.copy_uploads(original, question)  # the files go with the new version
        return start_generation(
            conversation, answerer, owner_channel, question.pk, user_message=question
        )


def create_retry(
    user: User, message_pk: int, owner_channel: str, answerer: Answerer | None = None
) -> StartedGeneration:
    """A new version of the answer `message_pk` (its sibling, answering the same question from
    the same context), by `answerer`; None: by the answer's gateway and model, making what the
    answer was (an image generation again makes as many images)."""
    rate_limits.check_generation_start(user)
    with transaction.atomic():
        answer = _finished_answer(user, message_pk)
        conversation = idle_conversation(user, answer.conversation_id)
        if answerer is None:
            answerer = _answered_by(answer)
        previous = _generation_of(answer)
        passages = knowledge_context.kept(previous.passages) if previous else ()
        return start_generation(
            conversation, answerer, owner_channel, answer.parent_id, passages=passages
        )


def _answered_by(answer: Message) -> Answerer:
    """The gateway and model that wrote `answer`, and what they made of it; `TurnError` for an
    answer no generation wrote (an imported one)."""
    generation = _generation_of(answer)
    if generation is None:
        raise TurnError(IMPORTED_RETRY)
    images = [a for a in answer.attachments if a.get("kind") in ("image", "image_url")]
    return Answerer(
        gateway=config_for(generation.gateway_id),
        model=generation.model,
        kind=Generation.Kind(generation.kind),
        image_count=max(1, len(images)),
    )


def create_tool_round(
    answer: Message, generation: Generation, tools: tuple[dict[str, Any], ...]
) -> StartedGeneration:
    """The next round of a turn whose answer `answer` (written by `generation`) had its tool
    calls run: a new answer after it, continuing from their results, on the same gateway and
    model with the same budget and the same `tools` (its context holds their calls, whatever the
    settings say since). Called inside the transaction that writes `answer`'s final state, so no
    other turn can start between the two. The model is the stored generation's, allowed when the
    turn began, never one posted: so it is not checked again (`model_allowed`)."""
    conversation = Conversation.objects.select_for_update().get(pk=answer.conversation_id)
    return start_generation(
        conversation,
        Answerer(gateway=config_for(generation.gateway_id), model=generation.model),
        generation.owner_channel,
        answer.pk,
        max_tokens=generation.max_tokens,
        tools=tools,
        model_allowed=True,
        passages=knowledge_context.kept(generation.passages),
    )


def create_continuation(user: User, message_pk: int, owner_channel: str) -> StartedGeneration:
    """A retry of the answer `message_pk`, which ran out of its token budget, on its gateway and
    model with a `larger_budget`."""
    rate_limits.check_generation_start(user)
    with transaction.atomic():
        cut = _finished_answer(user, message_pk)
        generation = _generation_of(cut)
        if generation is None:
            raise TurnError(IMPORTED_CONTINUE)
        budget = larger_budget(generation)
        if generation.finish_reason != "length" or budget is None:
            raise TurnError("Only an answer that ran out of its token budget gets a larger one.")
        conversation = idle_conversation(user, cut.conversation_id)
        answerer = Answerer(gateway=config_for(generation.gateway_id), model=generation.model)
        return start_generation(
            conversation,
            answerer,
            owner_channel,
            cut.parent_id,
            max_tokens=budget,
            passages=knowledge_context.kept(generation.passages),
        )


def select_version(user: User, message_pk: int) -> tuple[Conversation, int]:
    """Show the branch of the user's message `message_pk`: its newest descendant becomes the
    conversation's current leaf. The conversation, and that leaf."""
    with transaction.atomic():
        message = own_message(user, message_pk)
        # Locked as a new turn locks it: a turn starting meanwhile makes its answer the leaf
        # after this, not under it.
        conversation = Conversation.objects.select_for_update().get(pk=message.conversation_id)
        leaf = MessageTree(conversation.pk).newest_below(message.pk)
        conversation.current_leaf_id = leaf
        conversation.save(update_fields=["current_leaf"])
    return conversation, leaf


def _finished_answer(user: User, message_pk: int) -> Message:
    """The user's assistant message `message_pk` once its generation has ended (an imported
    answer has none)."""
    answer = own_message(user, message_pk, Message.Role.ASSISTANT)
    generation = _generation_of(answer)
    if generation is not None and generation.is_running:
        raise TurnError("This answer is still being written.")
    return answer


def _generation_of(answer: Message) -> Generation | None:
    """The generation that wrote `answer`; None for an answer that came in with an import."""
    try:
        return answer.generation
    except Generation.DoesNotExist:
        return None
