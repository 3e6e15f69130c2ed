"""Runs one generation as an asyncio task on the server's loop, independent of any websocket.

The worker reads the stream: its `Accumulator` folds every event into the `Completion` the final
write reads, and the visible events queue in a `LiveState`. Everything periodic is the process's
`Ticker`'s (deltas to the conversation's group, partial batches to the database) and so are
control messages (Stop and snapshot requests, from any process), so a worker costs no loop of its
own. The first output goes to the browsers at once, not at the next tick. Cancel closes the
upstream connection by cancelling the stream task, which leaves `stream_chat`'s block: that is the
only cancel the gateways know. The final state is written in one transaction; a cost the stream
did not report is then reconciled from the gateway's generation record.

The worker never sends its answer's request again itself; the client and its transport may, and
draw every resend from the one `RetryBudget` the worker makes for the answer (a tool round's
request is the next generation's, with a budget of its own).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Coroutine
from decimal import Decimal
from typing import Any

from django.urls import reverse

from chatapp import records_thread
from chatapp.conversations.jobs import Job, JobEnd, Status
from chatapp.conversations.request_options import RequestOptions, stream_arguments
from chatapp.costs import settling, spending_limits
from chatapp.costs.models import Generation
from chatapp.costs.spending_limits import SPENDING_LIMIT
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.image_models import image_prompt
from chatapp.messaging import layer_errors, socket_messages
from chatapp.rendering.markdown import doc_id_for
from chatapp.streaming import log_context, memory_trim, persistence, titles, tool_loop
from chatapp.streaming.live_state import LiveState
from chatapp.streaming.persistence import AnswerFinal
from chatapp.streaming.ticker import Ticker, current_ticker, ticker
from chatapp.streaming.tool_loop import CallRun
from chatapp.streaming.writer import PartialRow
from chatapp.tools.base import ToolContext
from gateway_client import EventStream, GatewayClient, RetryBudget
from gateway_client.errors import (
    ConnectError,
    ErrorInfo,
    GatewayError,
    GatewayTimeout,
    IncompleteStream,
    StatusError,
)

logger = logging.getLogger(__name__)

RECONCILE_TIMEOUT = 30.0

_running: dict[int, GenerationWorker] = {}
_tasks: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones

INTERNAL_ERROR = ErrorInfo(
    None,
    "internal_error",
    "internal_error",
    "The server failed while reading the answer; what arrived is kept.",
)


class EarlyStream:
    """An upstream request sent before its generation's rows exist: a new chat's request goes out
    as soon as the message is checked, and its database work overlaps the gateway's first token
    instead of delaying it. The worker then reads it as it would a stream it opened itself, and
    takes over its `retries`: the answer's one budget."""

    def __init__(
        self,
        gw: GatewayClient,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        options: RequestOptions | None = None,
        tools: tuple[dict[str, Any], ...] = (),
    ) -> None:
        arguments = stream_arguments(options, gw.dialect, messages, max_tokens, tools)
        self.retries = RetryBudget()
        self.stream = gw.stream_chat(model=model, retries=self.retries, **arguments)
        self._opening = asyncio.get_running_loop().create_task(
            self.stream.__aenter__(), context=contextvars.Context()
        )

    async def __aenter__(self) -> EventStream:
        try:
            return await asyncio.shield(self._opening)
        except asyncio.CancelledError:
            await self.aclose()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stream.aclose()

    async def aclose(self) -> None:
        """Cancel the request, or close the response it got: the generation will not run."""
        self._opening.cancel()
        await asyncio.gather(self._opening, return_exceptions=True)
        await self.stream.aclose()


def open_early(
    config: GatewayConfig,
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int | None = None,
    options: RequestOptions | None = None,
    tools: tuple[dict[str, Any], ...] = (),
) -> EarlyStream:
    """Send a generation's upstream request now, on its gateway's shared client."""
    return EarlyStream(shared_client(config), model, messages, max_tokens, options, tools)


class GenerationWorker:
    def __init__(
        self,
        job: Job,
        ticker: Ticker,
        *,
        early: EarlyStream | None = None,
    ) -> None:
        self.job = job
        self.ticker = ticker
        self.config = job.gateway
        self._early = early
        # The answer's one budget for sending its request again, whichever layer would.
        self.retries = early.retries if early is not None else RetryBudget()
        self.layer: socket_messages.ChannelLayer = ticker.layer
        self.group = socket_messages.group_name(job.conversation_pk)
        self.state = LiveState.for_answer(doc_id_for(job.message_pk), job.sources)
        self.flushed_seq = 0  # the last seq the writer has on disk
        self.request_id: str | None = None
        self._stream: EventStream | None = None
        self._cancel = asyncio.Event()
        # Spending limits (`spending_limits`): what this answer has reserved, a request for more
        # while one is out, and why it was stopped when there was no more.
        self._reserved = job.spend.reserved if job.spend is not None else None
        self._extending: asyncio.Task[None] | None = None
        self._limit_note: str | None = None
        self.sending = asyncio.Lock()  # one send at a time, so deltas leave in seq order
        self._done: dict[str, object] | None = None  # the `done` sent to the group, once it is

    # --- Lifecycle --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Stream to a terminal state, run the tool calls it asks for, persist it (starting the
        turn's next round when the calls ran), tell the browsers, then reconcile the cost."""
        self.ticker.add(self)  # `start` added it; a worker run otherwise (tests) is added here
        try:
            log_context.bind_generation(self.job.generation_pk, self.job.conversation_pk)
            gw = shared_client(self.config)
            end = await self._stream_until_done_or_cancelled(gw)
            runs = await self._run_tools(end)
            final = await self._finish(end, runs)
        finally:
            self.ticker.remove(self)
        last_round = final.next_job is None
        if end.status == Status.COMPLETED and last_round and self.job.kind == Generation.Kind.CHAT:
            titles.start_after(self.job.generation_pk)
        await settling.settle(
            gw, self.job.generation_pk, self.job.user_pk, final, changed=self._cost_changed
        )

    def cancel(self) -> None:
        self._cancel.set()

    async def _unless_cancelled[T](self, work: Coroutine[Any, Any, T]) -> T | None:
        """`work`'s result, or None when the user stops first: `work` is then cancelled (a stream
        leaves `stream_chat`'s block, which closes the upstream connection)."""
        task = asyncio.create_task(work)
        cancelled = asyncio.create_task(self._cancel.wait())
        try:
            await asyncio.wait({task, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            return task.result() if task.done() else None
        finally:
            for waiting in (task, cancelled):
                waiting.cancel()
            await asyncio.gather(task, cancelled, return_exceptions=True)

    async def _stream_until_done_or_cancelled(self, gw: GatewayClient) -> JobEnd:
        if self._cancel.is_set():  # stopped before it ran (a tool round's next): never asked
            if self._early is not None:
                await self._early.aclose()
            return JobEnd(Status.CANCELLED)
        end = await self._unless_cancelled(self._stream_answer(gw))
        if end is None and self._limit_note is not None:
            logger.info("Generation %s stopped at a spending limit", self.job.generation_pk)
            note = self._limit_note
            return JobEnd(Status.CANCELLED, ErrorInfo(None, SPENDING_LIMIT, SPENDING_LIMIT, note))
        if end is None:
            logger.info("Generation %s cancelled", self.job.generation_pk)
            return JobEnd(Status.CANCELLED)
        return end

    # --- Spending limits --------------------------------------------------------------------------

    def check_spend(self) -> None:
        """The ticker's, once per tick: past what it reserved, this answer asks its limits for
        more (`spending_limits.extend`, off the loop), and is stopped when they have none."""
        watch = self.job.spend
        if watch is None or self._reserved is None or self._extending is not None:
            return
        if self._cancel.is_set():
            return
        cost = watch.cost_so_far(len(self.state.content) + len(self.state.reasoning))
        if cost > self._reserved:
            self._extending = asyncio.get_running_loop().create_task(self._extend(cost))

    async def _extend(self, cost: Decimal) -> None:
        job = self.job
        assert job.spend is not None
        try:
            larger = await records_thread.on_record_thread(
                spending_limits.extend, job.generation_pk, job.user_pk, job.spend, cost
            )
            if larger is None:
                self._limit_note = await records_thread.on_record_thread(
                    spending_limits.stop_note, job.spend, job.user_pk
                )
                self.cancel()
            else:
                self._reserved = larger
        except Exception:  # the database is away: the answer goes on, and is checked again
            logger.exception("Generation %s: its limits were not checked", job.generation_pk)
        finally:
            self._extending = None

    async def _stream_answer(self, gw: GatewayClient) -> JobEnd:
        """Never raises: every failure becomes a `JobEnd` the user can read."""
        job = self.job
        state = self.state
        try:
            async with self._early or self._open(gw) as stream:
                self._stream = stream
                self.request_id = stream.request_id
                loop = asyncio.get_running_loop()
                async for event in stream:
                    if state.apply(event, loop.time()) and state.seq == 0:
                        await self.send_delta()  # the first output goes at once
                return JobEnd(Status.COMPLETED, completion=stream.completion)
        except StatusError as exc:
            logger.warning("Generation %s refused: %s", job.generation_pk, exc)
            return JobEnd(Status.FAILED, exc.info, retry_after=exc.retry_after)
        except (IncompleteStream, ConnectError) as exc:
            started = self._stream is not None
            logger.warning("Generation %s ended early: %s", job.generation_pk, exc)
            status = Status.INCOMPLETE if started else Status.FAILED
            return JobEnd(status, exc.info, completion=exc.completion)
        except GatewayTimeout as exc:
            logger.warning("Generation %s timed out (%s): %s", job.generation_pk, exc.phase, exc)
            message = socket_messages.timeout_message(exc.phase, exc.message)
            info = dataclasses.replace(exc.info, message=message)
            return JobEnd(Status.FAILED, info, completion=exc.completion)
        except GatewayError as exc:
            logger.warning("Generation %s failed: %s", job.generation_pk, exc)
            return JobEnd(Status.FAILED, exc.info, completion=exc.completion)
        except Exception:
            logger.exception("Generation %s crashed", job.generation_pk)
            return JobEnd(Status.FAILED, INTERNAL_ERROR)

    def _open(self, gw: GatewayClient) -> EventStream:
        """The upstream request for this generation's kind."""
        job = self.job
        if job.kind == Generation.Kind.IMAGE:
            prompt = image_prompt(job.messages)
            return gw.stream_images(
                model=job.model, prompt=prompt, n=job.image_count, retries=self.retries
            )
        return gw.stream_chat(
            model=job.model,
            retries=self.retries,
            **stream_arguments(job.options, gw.dialect, job.messages, job.max_tokens, job.tools),
        )

    # --- Tools ---------------------------------------------------------------------------------

    async def _run_tools(self, end: JobEnd) -> list[CallRun] | None:
        """Run the calls a completed round asks for (None when it asks for none), until they end
        or the user stops the turn. Past the round limit they are not run, and say why. Never
        raises: the app's own failure is each call's error, logged."""
        job = self.job
        calls = tool_loop.calls_to_run(job, end)
        if not calls:
            return None
        if tool_loop.over_limit(job.tool_round):
            logger.info("Generation %s: past the tool round limit", job.generation_pk)
            return self._shown(
                tool_loop.not_run(calls, job.generation_pk, tool_loop.limit_reason())
            )
        latest: dict[int, CallRun] = {}

        async def changed(run: CallRun) -> None:
            latest[run.index] = run
            self.state.set_tool_run(run.to_dict(), asyncio.get_running_loop().time())
            try:
                await self.send_delta()  # a start or an end is shown at once
            except Exception:  # the tools run on; browsers that missed it catch up by snapshot
                logger.warning("Generation %s: a tool update was not sent", job.generation_pk)

        context = ToolContext(job.user_pk, job.conversation_pk)
        offered = tool_loop.offered_names(job)
        try:
            runs = await self._unless_cancelled(
                tool_loop.run_calls(calls, job.generation_pk, context, offered, changed)
            )
        except Exception:
            logger.exception("Generation %s: running its tools failed", job.generation_pk)
            return self._shown(tool_loop.failed(calls, job.generation_pk))
        if runs is None:
            logger.info("Generation %s: stopped while its tools ran", job.generation_pk)
            return self._shown(tool_loop.cancelled(latest.values()))
        return runs

    def _shown(self, runs: list[CallRun]) -> list[CallRun]:
        """`runs`, queued for the browsers with the last delta."""
        for run in runs:
            self.state.set_tool_run(run.to_dict())
        return runs

    # --- What the ticker asks of a worker ---------------------------------------------------------

    def take_delta(self) -> list[list[object]]:
        """The ticker's, holding `sending`: the pending delta as it goes on the wire, in as many
        parts as its text needs (`socket_messages.delta_frames`), none when nothing is pending
        (the ticker sends them in its conversation's frames, `frames.py`)."""
        delta = self.state.take_delta()
        return [] if delta is None else socket_messages.delta_frames(self.job.generation_pk, delta)

    async def send_delta(self, *, last: bool = False) -> None:
        """What is pending, at once and in a frame of its own (the first output, a tool run's
        start or end, the last delta): the ticker's are `take_delta`'s."""
        if not last:
            async with self.sending:
                await self._send_delta(self.state.take_delta())
            return
        # What arrived is shown now, and the render pool's time (the last settled blocks, the
        # final render) is waited out holding nothing: a short answer arrives whole before the
        # first tick, and a page that joins then gets it by snapshot, which waits for `_sending`.
        async with self.sending:
            await self._send_delta(self.state.take_delta())
        await self.state.finish_render()
        async with self.sending:
            await self._send_delta(self.state.take_last_delta())

    async def _send_delta(self, delta: dict[str, object] | None) -> None:
        if delta is None:
            return
        for frame in socket_messages.delta_frames(self.job.generation_pk, delta):
            if not await self.ticker.send(self.group, socket_messages.group_message(frame)):
                return

    async def snapshot_message(self) -> dict[str, object]:
        """What a socket that asks is told: the answer so far; once the answer has ended (the
        worker stays on to settle its cost), its `done`, which a socket that joined the group
        after it was sent never heard."""
        if self._done is not None:
            return self._done
        async with self.sending:  # exact at its seq: no delta is between taken and sent
            now = asyncio.get_running_loop().time()
            return socket_messages.snapshot(self.job.generation_pk, self.state.snapshot(now))

    async def send_snapshot(self, reply_to: str) -> None:
        """`snapshot_message` to the socket `reply_to`, in any process (the ticker's control)."""
        message = await self.snapshot_message()
        await self.layer.send(reply_to, socket_messages.group_message(message))

    def partial_row(self) -> PartialRow:
        state = self.state
        text = None
        if state.seq != self.flushed_seq:
            text = (state.content, state.reasoning, state.tool_calls())
        return PartialRow(
            generation_pk=self.job.generation_pk,
            message_pk=self.job.message_pk,
            seq=state.seq,
            upstream_id=self._upstream_id(),
            ttft_ms=self._ttft_ms(),
            text=text,
        )

    # --- Finishing --------------------------------------------------------------------------------

    def _upstream_id(self) -> str | None:
        return self._stream.generation_id if self._stream is not None else None

    def _ttft_ms(self) -> int | None:
        seconds = self._stream.time_to_first_token if self._stream is not None else None
        return None if seconds is None else round(seconds * 1000)

    async def _finish(self, end: JobEnd, runs: list[CallRun] | None = None) -> AnswerFinal:
        # Everything received reaches the browsers before `done`, its last blocks rendered.
        await self.send_delta(last=True)
        if self._stream is not None:  # on cancel and crashes too: whatever arrived counts
            self.request_id = self.request_id or self._stream.request_id
            if end.completion is None:
                end = dataclasses.replace(end, completion=self._stream.completion)
        final = await persistence.save_final(
            self.job.generation_pk,
            self.state,
            end,
            self._ttft_ms(),
            self.request_id,
            self._stream.dialect if self._stream is not None else None,
            thinking_ms=self.state.thinking_ms(asyncio.get_running_loop().time()),
            tool_runs=runs,
            next_round_tools=self.job.tools if tool_loop.continues(runs, self._cancel) else None,
        )
        next_url = None
        if final.next_job is not None:
            # Running before the browsers hear of it, so a Stop for it finds its worker.
            start(final.next_job)
            if self._cancel.is_set():  # Stop came while this round was written: never asked
                _running[final.next_job.generation_pk].cancel()
            next_url = reverse("chat:message", args=[final.next_job.message_pk])
        done = socket_messages.done(self.job.generation_pk, self.state.seq, end.status, next_url)
        self._done = done  # from now on, a snapshot asked is answered by the end itself
        await layer_errors.send_retrying(  # no later message would tell a page it was lost
            lambda: self.layer.group_send(self.group, socket_messages.group_message(done)),
            f"the end of generation {self.job.generation_pk}",
        )
        return final

    async def _cost_changed(self) -> None:
        updated = socket_messages.group_message(socket_messages.updated(self.job.generation_pk))
        try:
            await self.layer.group_send(self.group, updated)
        except layer_errors.LAYER_DOWN as exc:  # the cost is saved; a reload shows it
            logger.warning(
                "Generation %s: its cost update was not sent (%s)", self.job.generation_pk, exc
            )


# --- Process-local registry -----------------------------------------------------------------------


def running_pks() -> set[int]:
    return set(_running)


def running_here(generation_pk: int, user_pk: int) -> GenerationWorker | None:
    """The worker of `user_pk`'s generation `generation_pk` if it runs in this process."""
    found = _running.get(generation_pk)
    return found if found is not None and found.job.user_pk == user_pk else None


def start(job: Job, *, early: EarlyStream | None = None) -> asyncio.Task[None]:
    """Run `job` on the current loop, detached from the request that started it (whose
    `owner_channel()` call started the loop's ticker).

    An empty context keeps the task out of the request's thread-sensitive executor (which Django
    shuts down when the response is sent).
    """
    worker = GenerationWorker(job, current_ticker(), early=early)
    _running[job.generation_pk] = worker
    worker.ticker.add(worker)  # at once: a Stop may come before the task first runs
    task = asyncio.get_running_loop().create_task(worker.run(), context=contextvars.Context())

    def _done(task: asyncio.Task[None]) -> None:
        _running.pop(job.generation_pk, None)
        worker.ticker.remove(worker)  # also when the task never ran its first step
        memory_trim.answer_ended(last=not _running)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Generation %s worker died", job.generation_pk, exc_info=task.exception())

    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    task.add_done_callback(_done)
    return task


async def owner_channel() -> str:
    """The channel that reaches this process's generations (`Generation.owner_channel`)."""
    return (await ticker()).channel
