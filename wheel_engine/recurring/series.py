"""The engine's side of recurring timers: schedule, replace and cancel a recurrence, and keep
its series of occurrences going across runs, crashes and downtime.

Built on the public timer calls alone (``schedule_many``, ``schedule``, ``cancel``, ``lookup``):

- ``schedule_recurring`` commits the recurrence's record (:mod:`.records`) and its first
  occurrence in one ``schedule_many`` commit, then cancels the old rule's pending occurrences;
- each occurrence runs under a derived handler (``recurring:<handler>``) whose spec carries a
  successor (:class:`~wheel_engine.recurring.chain.Chain`): on SQLite and in memory the next
  occurrence is committed **in the same commit as the occurrence's attempt**
  (:mod:`wheel_engine.successors`), decided in memory from the record and its rule, with
  ``catch_up`` applied to an occurrence missed while the engine was down; no crash falls
  between the two. The handler then acts on that same plan: it waits for a running predecessor
  when ``overlap=False`` and calls the user's handler (or skips it, by ``catch_up``). On
  PostgreSQL the claim's transaction inserts it, by the rule its node keeps (:mod:`.node_rules`);
- occurrence keys are deterministic and an occurrence is materialised only if its key is not
  known yet (in any state), so a re-run after a crash (or a retry) never creates one twice;
- on open, :meth:`Series.reconcile` materialises the next occurrence of every recurrence of
  this engine's table that has none pending (its chain broke: a cancelled occurrence, a last
  attempt a crash interrupted).

On PostgreSQL every key of a recurrence (record and occurrences) is in the partition of its
name (:mod:`journal.postgres.partitioning`), so the one node holding that partition's lease
materialises and runs each occurrence, and ``overlap=False`` sees its running predecessor.

Not guaranteed: an occurrence key forgotten after ``retention`` can be created again by a
retry of its predecessor that comes later than that; ``overlap=False`` waits for predecessors
running on this node only, so after a takeover (a lease lost while an occurrence still ran:
the at-least-once case) an occurrence can start on the new holder while its predecessor still
runs on the old one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from wheel_engine.errors import UnknownHandler
from wheel_engine.events import Event, EventBus, EventKind
from wheel_engine.handlers import HandlerSpec, make_spec
from wheel_engine.model import CancelResult, Firing, TimerInfo, TimerState
from wheel_engine.recurring.chain import Chain
from wheel_engine.recurring.node_rules import NodeRules
from wheel_engine.recurring.records import (
    DORMANT_DUE,
    RULE_HANDLER,
    RecurrenceInfo,
    decode_rule,
    encode_rule,
    info_of,
    occurrence_handler,
    of_rule,
    rule_key,
    user_handler,
)
from wheel_engine.recurring.rule import (
    CATCH_UP,
    check_recurrence_name,
    first_due,
    occurrence_key,
    occurrence_of,
    parse_rule,
)
from wheel_engine.successors import Successors
from wheel_engine.tracing import current_context, scheduling_in

__all__ = ["Series"]

logger = logging.getLogger(__name__)

_LIVE = (TimerState.PENDING, TimerState.RUNNING)
_TICK = 1e-6


class EngineLike(Protocol):
    """What :class:`Series` uses of the engine: its public timer calls, its clock, its handler
    table and the timer table's ``unpark`` (no import of the engine: it imports this)."""

    _handlers: dict[str, HandlerSpec]
    _events: EventBus
    _table: Any
    _node: Any  # None but on PostgreSQL
    _dispatcher: Any
    _scheduler: Any
    _commits: Any
    clock: Any
    default_retry: Any

    def timers(self, state: Any = None, handler: str | None = None) -> list[TimerInfo]: ...
    async def lookup(self, key: str) -> TimerInfo | None: ...
    async def schedule_many(self, requests: Any) -> list[TimerInfo]: ...
    async def cancel(self, key: str, *, version: int | None = None) -> Any: ...
    def on_event(self, callback: Any) -> Any: ...
    def schedule(self, handler: str, **fields: Any) -> Awaitable[TimerInfo]: ...


def _ignore(firing: Firing) -> None:
    """The record's handler: a record is due in year 9999 and never fires in practice."""


class Series:
    """The recurrences of one engine. Its methods run on the engine's loop."""

    def __init__(self, engine: EngineLike) -> None:
        self._engine = engine
        self._running: dict[str, dict[float, asyncio.Event]] = {}  # name -> nominal -> done
        self._ours: set[str] = set()  # occurrence keys this object is cancelling itself
        self._tasks: set[asyncio.Task[None]] = set()
        self._watching = False
        self._chain = Chain(engine._table.timers, engine.clock, engine._node is None)
        if engine._node is not None:  # PostgreSQL: the node keeps the records (.node_rules)
            engine._node.records = NodeRules(self._chain, self._watch)
        self.traced = False  #: set while the engine traces (wheel_engine.tracing, #29)

    # ------------------------------------------------------------------ registration
    def install(self) -> None:
        """Register the record's handler (in the engine's ``__init__``)."""
        engine = self._engine
        engine._handlers[RULE_HANDLER] = make_spec(
            RULE_HANDLER, _ignore, timeout=None, retry=engine.default_retry, thread=False
        )

    def registered(self, spec: HandlerSpec) -> bool:
        """Derive the occurrence handler of a just registered user handler (never one of the
        engine's own names: ``register()`` refuses those); True if occurrences parked for want
        of it (at recovery) became due."""
        derived = HandlerSpec(
            occurrence_handler(spec.name),
            self._run,
            spec.timeout,
            spec.retry,
            True,
            False,
            False,
            spec.describe_error,
            successor=self._chain.successor,
        )
        self._engine._handlers[derived.name] = derived
        return bool(self._engine._table.unpark(derived.name))

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Note when downtime ended and reconcile the recurrences this engine holds."""
        self._chain.started_at = self._engine.clock.time()
        await self.reconcile()

    def _watch(self) -> None:
        """Follow the engine's events (a cancelled occurrence), once this engine has a
        recurrence to care about: an engine without one keeps its events off (their cost)."""
        if not self._watching:
            self._watching = True
            self._engine.on_event(self._on_event)
            engine = self._engine  # each successor commits with its predecessor's attempt
            parts = (engine._table, engine._scheduler, engine._commits, engine._events)
            shared = engine._node is not None  # PostgreSQL: with its claim, by the node's sink
            engine._dispatcher._queue.successors = Successors(*parts, engine.clock, shared)

    async def reconcile(self) -> None:
        """Materialise the next occurrence of each recurrence with none pending or running."""
        engine = self._engine
        records = engine.timers(TimerState.PENDING, RULE_HANDLER)
        if not records:
            return
        self._watch()
        latest: dict[str, tuple[float, bool]] = {}  # name -> (latest nominal, live)
        for info in engine.timers():
            found = occurrence_of(info.key)
            if found is None:
                continue
            name, nominal = found
            seen = latest.get(name)
            live = info.state in _LIVE or (seen is not None and seen[1])
            if seen is None or nominal > seen[0]:
                latest[name] = (nominal, live)
            elif live:
                latest[name] = (seen[0], True)
        now = engine.clock.time()
        for record in records:
            name = record.key.rpartition("@")[0]
            seen = latest.get(name)
            if seen is not None and seen[1]:
                continue
            rule = decode_rule(record.payload)
            after = seen[0] if seen is not None else now - _TICK
            await self._materialize(name, record.payload, rule.next_after(after))

    # ------------------------------------------------------------------ the public calls
    async def schedule(
        self,
        name: object,
        handler: object,
        cron: object,
        every: object,
        tz: object,
        payload: Any,
        catch_up: object,
        overlap: object,
        start: object,
    ) -> RecurrenceInfo:
        """``Engine.schedule_recurring``: checks everything, then commits record and first
        occurrence together, then cancels the pending occurrences of the rule it replaced."""
        engine = self._engine
        checked = check_recurrence_name(name)
        if type(handler) is not str or handler not in engine._handlers or handler == RULE_HANDLER:
            raise UnknownHandler(f"handler {handler!r} is not registered")
        if catch_up not in CATCH_UP:
            raise ValueError(f"catch_up must be one of {CATCH_UP}, not {catch_up!r}")
        if type(overlap) is not bool:
            raise TypeError(f"overlap must be a bool, not {type(overlap).__name__}")
        now = engine.clock.time()
        rule = parse_rule(cron, every, tz, start, now)
        self._watch()
        first = first_due(rule, start, now)
        creator = current_context() if self.traced else None  # every occurrence links to it
        fields = encode_rule(rule, handler, payload, str(catch_up), overlap, first, creator)
        old = await engine.lookup(rule_key(checked))
        old_pending = await self._pending_of(checked, old)
        key = occurrence_key(checked, first)
        current = await engine.lookup(key)
        running = current is not None and current.state is TimerState.RUNNING
        with scheduling_in(creator):  # the record and the first occurrence store it too
            infos = await engine.schedule_many(
                [
                    {"handler": RULE_HANDLER, "key": rule_key(checked), "at": DORMANT_DUE,
                     "payload": fields},
                    {"handler": occurrence_handler(handler), "key": key, "at": first,
                     "payload": payload, "on_conflict": "keep" if running else "replace"},
                ]
            )  # fmt: skip
        self._chain.keep(checked, infos[0].version, fields)  # its first occurrence's successor
        for stale in old_pending:
            if stale.key != key:
                await self._cancel_occurrence(stale)
        self._announce(EventKind.RECURRENCE_SCHEDULED, checked, infos[0].version, handler, first)
        return info_of(checked, fields, infos[0].version, first)

    async def cancel(self, name: object, version: int | None) -> bool:
        """``Engine.cancel_recurring``: True if the recurrence (at ``version``, when given) was
        live and is now cancelled, with its pending occurrence; a running one finishes."""
        checked = check_recurrence_name(name)
        record = await self._engine.lookup(rule_key(checked))
        if record is None or record.state is not TimerState.PENDING:
            return False
        if version is not None and version != record.version:
            return False
        pending = await self._pending_of(checked, record)
        result = await self._engine.cancel(rule_key(checked), version=record.version)
        if result is not CancelResult.CANCELED:
            return False
        handler = str(record.payload["handler"])
        self._announce(EventKind.RECURRENCE_CANCELED, checked, record.version, handler, None)
        for stale in pending:
            await self._cancel_occurrence(stale)
        return True

    def _announce(
        self, kind: EventKind, name: str, version: int, handler: str, due: float | None
    ) -> None:
        """Emit a recurrence's event (once its change is committed)."""
        bus = self._engine._events
        if bus.active:
            now = self._engine.clock.time()
            at = due if due is not None else now
            bus.emit(Event(kind, name, version, handler, at, now, None, 0, None, None))

    # ------------------------------------------------------------------ the occurrences
    async def _run(self, firing: Firing) -> None:
        """An occurrence's handler: its successor was committed with its attempt (else, on
        PostgreSQL, it is committed here first); then it runs the user's handler."""
        found = occurrence_of(firing.key)
        user = user_handler(firing.handler)
        if found is None or user is None:
            return  # scheduled under the derived handler by hand: nothing to run as a series
        name, nominal = found
        self._watch()
        plan = self._chain.planned(firing.key)
        if plan is None or self._engine._node is not None:  # PostgreSQL: its rule may be stale
            record = await self._engine.lookup(rule_key(name))
            if record is None or record.state is not TimerState.PENDING:
                self._chain.forget(name)
                return  # the recurrence was cancelled: this occurrence is a leftover
            if plan is None or plan.version != record.version:  # none chained: go on here
                now = self._engine.clock.time()
                plan = self._chain.decide(name, nominal, record.version, record.payload, now)
                if plan is None:
                    return  # an occurrence of a rule since replaced
                await self._materialize(name, plan.fields, plan.following)
        if not plan.run:
            return
        fields = plan.fields
        done = asyncio.Event()
        mine = self._running.setdefault(name, {})
        earlier = [event for at, event in mine.items() if at < nominal]
        mine[nominal] = done
        try:
            if not fields["overlap"]:
                for event in earlier:
                    await event.wait()
            await self._call(user, firing)
        finally:
            done.set()
            del mine[nominal]
            if not mine:
                del self._running[name]

    async def _call(self, user: str, firing: Firing) -> None:
        spec = self._engine._handlers.get(user)
        if spec is None:
            raise UnknownHandler(f"handler {user!r} is not registered")
        if spec.is_async:
            await spec.fn(firing)
        elif spec.thread:
            await asyncio.to_thread(spec.fn, firing)
        else:
            spec.fn(firing)

    async def _materialize(self, name: str, fields: dict[str, Any], nominal: float) -> None:
        """Commit the occurrence due at ``nominal`` unless its key is already known."""
        key = occurrence_key(name, nominal)
        if await self._engine.lookup(key) is not None:
            return
        with scheduling_in(fields.get("trace")):  # its creator's context (tracing, #29)
            await self._engine.schedule(
                occurrence_handler(str(fields["handler"])),
                at=nominal,
                key=key,
                payload=fields["payload"],
                on_conflict="keep",
            )

    async def _pending_of(self, name: str, record: TimerInfo | None) -> list[TimerInfo]:
        """The pending occurrences of ``name`` this engine can find: in its table, and the
        record's rule's last and next nominal times (looked up: on PostgreSQL they may be
        another node's)."""
        engine = self._engine
        found: dict[str, TimerInfo] = {}
        prefix = name + "@"
        for info in engine.timers(TimerState.PENDING):
            if info.key.startswith(prefix) and occurrence_of(info.key) is not None:
                found[info.key] = info
        if record is not None and record.state is TimerState.PENDING:
            rule = decode_rule(record.payload)
            now = engine.clock.time()
            for nominal in (rule.next_after(now - _TICK), rule.next_after(now)):
                key = occurrence_key(name, nominal)
                looked = await engine.lookup(key)
                if looked is not None and looked.state is TimerState.PENDING:
                    found[key] = looked
        return list(found.values())

    async def _cancel_occurrence(self, info: TimerInfo) -> None:
        self._ours.add(info.key)
        try:
            await self._engine.cancel(info.key, version=info.version)
        finally:
            self._ours.discard(info.key)

    def _on_event(self, event: Any) -> None:
        """A cancelled pending occurrence (``cancel`` skips one): the series goes on after it."""
        if event.kind != "canceled" or event.key in self._ours or event.duration is not None:
            return
        found = occurrence_of(event.key)
        if found is None or user_handler(event.handler) is None:
            return
        self._spawn(self._after_cancel(found[0], found[1]))

    async def _after_cancel(self, name: str, nominal: float) -> None:
        """The series goes on after the cancelled occurrence at ``nominal``, if it is one of the
        live rule: one of a rule since replaced (by another node, whose cancels this node
        learns from the feed) is followed by the new rule's first, committed with its record."""
        record = await self._engine.lookup(rule_key(name))
        if record is None or record.state is not TimerState.PENDING:
            return
        rule = decode_rule(record.payload)
        if of_rule(record.payload, rule, nominal):
            await self._materialize(name, record.payload, rule.next_after(nominal))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception:
                logger.exception("recurring: could not go on after a cancelled occurrence")

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
