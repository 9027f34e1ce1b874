"""The append-only SQLite journal behind wheel-engine. Pure storage: it knows nothing of wheels,
handlers or the engine, and never imports ``wheel_engine``."""

from journal.errors import JournalCorrupt, JournalError, JournalLocked
from journal.records import Ack, Attempt, Cancel, Dead, Kind, Record, Redrive, Retry, Schedule

__all__ = [
    "Ack",
    "Attempt",
    "Cancel",
    "Dead",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "Kind",
    "Record",
    "Redrive",
    "Retry",
    "Schedule",
]
