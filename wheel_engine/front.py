"""The engine's front door: whether it takes new work, and the body of ``schedule()``, compiled.

``Engine.schedule`` returns :func:`schedule`'s coroutine. It behaves as the ``async def`` it
replaces: nothing is checked, changed or written until the coroutine first runs (awaited, or
as a task), errors are raised from the await, and cancelling it while it waits for its commit
undoes nothing (:meth:`Scheduler.settle_fresh
<wheel_engine.scheduling.Scheduler.settle_fresh>`). Why a compiled module of its own: a task
drives the coroutine with no interpreted frame, and while it waits for its commit it is one
object that holds the timer and the future itself, few objects for the cyclic collector to walk
(``docs/design.md``, "Measured in the core").

The gate: an engine takes work from :meth:`Front.open` (``start()``) until
:meth:`Front.close` (``close()``, or a simulated crash); before and after, every public call
that changes timers raises :class:`~wheel_engine.errors.EngineError` saying which.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from wheel_engine.clock import SystemClock
from wheel_engine.errors import EngineError
from wheel_engine.model import TimerInfo

if TYPE_CHECKING:
    from wheel_engine.clock import Clock
    from wheel_engine.scheduling import Scheduler
    from wheel_engine.storage import Storage
    from wheel_engine.validation import RequestChecker

__all__ = ["CLOSING", "NOT_STARTED", "Front", "schedule"]

NOT_STARTED: Final = "engine not started: use 'async with engine' or await start()"
CLOSING: Final = "engine is closing: no new work is accepted"


class Front:
    """The gate, and what :func:`schedule` needs; the engine owns one.

    ``durable`` is False for an engine without a journal (nothing to wait for); ``local``
    (given to :meth:`open`) says the engine's own scheduler decides, as on SQLite, rather than
    a shared store (PostgreSQL assigns versions, so every schedule waits for it).
    """

    def __init__(
        self,
        clock: Clock,
        check: RequestChecker,
        scheduler: Scheduler,
        storage: Storage,
        *,
        durable: bool,
    ) -> None:
        self.refusal: str | None = NOT_STARTED  #: why work is refused; None while open
        self.storage = storage  #: the SQLite (or in-memory) side, until :meth:`open` says
        self.local = True
        self.check = check
        self.scheduler = scheduler
        self.durable = durable
        self._clock = clock
        # The real clock's time(), read directly: a call through the interpreted class is
        # a Python frame per schedule. A subclass may change time(), so only the exact class.
        self._wall_clock = type(clock) is SystemClock

    def open(self, storage: Storage, *, local: bool) -> None:
        """Take work from now on, through ``storage``."""
        self.storage = storage
        self.local = local
        self.refusal = None

    def close(self) -> None:
        """Take no new work from now on. Final."""
        self.refusal = CLOSING

    def check_open(self) -> None:
        """Raise :class:`EngineError` unless the engine takes work."""
        if self.refusal is not None:
            raise EngineError(self.refusal)

    def now(self) -> float:
        """The engine clock's wall time."""
        return time.time() if self._wall_clock else self._clock.time()


# A function, not a method of Front: mypyc makes each call of a module-level coroutine one
# object, where a method's takes two (a generator and its locals) when modules are compiled
# separately, as ours are: one more object for the collector to walk while each call waits.
async def schedule(
    front: Front,
    handler: Any,
    at: Any,
    delay: Any,
    payload: Any,
    key: Any,
    on_conflict: Any,
) -> TimerInfo:
    """``Engine.schedule`` through ``front``: see its docstring for the contract.

    The user's arguments are typed ``Any``: compiled, a narrower type would be checked on
    entry, and a wrong one raise mypyc's ``TypeError`` instead of the checker's own error."""
    front.check_open()
    now = front.now()
    request = front.check.request(handler, at, delay, payload, key, on_conflict, now)
    scheduler = front.scheduler
    if not front.durable:  # in memory: no commit to wait for
        return scheduler.schedule_one(request)[0]
    fast = front.local and scheduler.tracing is None  # tracing (#29): traced takes apply()
    fresh = scheduler.submit_fresh(request, now) if fast else None
    if fresh is None:  # the key names a timer, or the store decides (PostgreSQL)
        return await front.storage.schedule(request)
    timer, future = fresh
    del fresh
    due = timer.due
    del request  # not kept alive while we wait: see Scheduler.submit_fresh
    try:
        await future  # the commit
    except BaseException:
        scheduler.settle_fresh(timer, future, due, False)  # undone before we raise, if it failed
        raise
    return scheduler.settle_fresh(timer, future, due, True)  # as scheduled, even if it fired since
