"""wheel-engine: durable timers for asyncio.

A hierarchical hashed timing wheel runs inside the event loop; every schedule and cancel is
committed to an append-only SQLite journal before the call returns, so after a crash every timer
is rebuilt and fires at least once into an idempotent handler. See ``docs/contract.md``.
"""

import logging

from wheel_engine._build import compiled as _compiled
from wheel_engine.engine import Engine
from wheel_engine.errors import (
    DuplicateKey,
    EngineError,
    JournalCorrupt,
    JournalError,
    JournalLocked,
    PermanentError,
    TimerNotFound,
    UnknownHandler,
    UnusableConnection,
    WheelEngineError,
)
from wheel_engine.model import CancelResult, Firing, TimerInfo, TimerState
from wheel_engine.retry import RetryPolicy

__all__ = [
    "COMPILED",
    "CancelResult",
    "DuplicateKey",
    "Engine",
    "EngineError",
    "Firing",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "PermanentError",
    "RetryPolicy",
    "TimerInfo",
    "TimerNotFound",
    "TimerState",
    "UnknownHandler",
    "UnusableConnection",
    "WheelEngineError",
]
__version__ = "0.1.0"

#: True when this process runs the compiled core: every module listed in
#: ``wheel_engine/_build.py`` was imported from its mypyc extension. False for pure Python.
COMPILED: bool = _compiled()

# A library never configures logging: without this, Python's last-resort handler would print
# our warnings to stderr in applications that chose to configure none.
for _name in ("wheel_engine", "journal"):
    logging.getLogger(_name).addHandler(logging.NullHandler())
del _name
