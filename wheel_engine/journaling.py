"""Handing the firing path's records to the journal so that no record can stall it.

The firing path (attempts, acks, retries, deaths) runs inside clock callbacks and worker tasks:
an exception there would leave every other timer of the batch RUNNING for good. So
:func:`submit_safely` never raises. What it guarantees:

- a closed or failed journal gives an already-failed future, which the caller's failure path
  handles as it handles a failed commit;
- a record that cannot be encoded (validation keeps such keys out, so this is a defence: an
  error text with a lone surrogate, say) never holds back the others: its error text is made
  encodable (``backslashreplace``) or, if the record still cannot be written, it alone is left
  out and logged. Leaving a record out costs what a lost ack costs: that timer may fire again
  after a restart.
"""

from __future__ import annotations

import asyncio
import logging

from journal import Dead, Journal, Record, Retry, codec

logger = logging.getLogger(__name__)


def submit_safely(journal: Journal, records: list[Record]) -> asyncio.Future[None]:
    """``journal.submit(records)``, except that it never raises (see the module docstring)."""
    try:
        return journal.submit(records)
    except (TypeError, ValueError):  # one record cannot be encoded: write the others
        try:
            return journal.submit([fixed for fixed in map(_encodable, records) if fixed])
        except Exception as exc:
            return _failed(exc)
    except Exception as exc:  # closed, or the writer has failed
        return _failed(exc)


def _encodable(record: Record) -> Record | None:
    """``record`` if the journal can encode it, else a copy with its error text made encodable,
    else None (logged)."""
    if _encodes(record):
        return record
    if isinstance(record, Retry | Dead) and isinstance(record.error, str):
        text = record.error.encode("utf-8", "backslashreplace").decode("utf-8")
        fixed: Record = record._replace(error=text)
        if _encodes(fixed):
            return fixed
    logger.error("cannot journal %s of timer %r: left out", type(record).__name__, record[0])
    return None


def _encodes(record: Record) -> bool:
    try:
        codec.encode(record)
    except (TypeError, ValueError):
        return False
    return True


def _failed(error: Exception) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future
