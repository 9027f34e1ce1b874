"""The append-only SQLite journal behind wheel-engine. Pure storage: it knows nothing of wheels,
handlers or the engine, and never imports ``wheel_engine``."""

from journal.compaction import CompactionResult
from journal.errors import JournalCorrupt, JournalError, JournalLocked
from journal.journal import Durability, Journal
from journal.reader import CheckReport, JournalInfo
from journal.records import Ack, Attempt, Cancel, Dead, Kind, Record, Redrive, Retry, Schedule
from journal.recovery import Recovered
from journal.rules import apply
from journal.state import TimerRow, TimerState

__all__ = [
    "Ack",
    "Attempt",
    "Cancel",
    "CheckReport",
    "CompactionResult",
    "Dead",
    "Durability",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalInfo",
    "JournalLocked",
    "Kind",
    "Record",
    "Recovered",
    "Redrive",
    "Retry",
    "Schedule",
    "TimerRow",
    "TimerState",
    "apply",
]
