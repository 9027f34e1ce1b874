"""Opening a PostgreSQL journal for a command, and keeping its password out of every error.

:func:`connected` is the only place the CLI imports psycopg (through
:class:`journal.postgres.PostgresClient`). The client never creates or alters the schema: a
database that is not a wheel-engine journal is refused (exit 3) and left as it was.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from journal.errors import JournalError
from wheel_engine.cli.output import EXIT_ERROR, CliError, Output
from wheel_engine.cli.pg import mask_url, scrub
from wheel_engine.extras import install_hint

if TYPE_CHECKING:
    from journal.postgres import PostgresClient

__all__ = ["INSTALL_HINT", "connected", "guarded", "shown_args"]

INSTALL_HINT = install_hint("postgres")

Command = Callable[[argparse.Namespace, Output], int]


@contextmanager
def connected(url: str) -> Iterator[PostgresClient]:
    """A client on ``url`` (closed afterwards); ``CliError`` exit 3 if it cannot be had."""
    try:
        from journal.postgres.client import PostgresClient
    except ImportError:  # psycopg (or its libpq) is missing: the extra installs both
        raise CliError(
            f"{mask_url(url)}: a PostgreSQL journal needs psycopg: {INSTALL_HINT}",
            code=EXIT_ERROR,
        ) from None
    client = PostgresClient.connect(url)  # JournalError: turned into one line by guarded()
    try:
        yield client
    finally:
        client.close()


def guarded(command: Command) -> Command:
    """``command`` with every error it raises as one ``CliError`` line, password masked.

    The SQLite error path (``wheel_engine.cli.main``) prefixes errors with the DB argument as
    given; here nothing leaves without :func:`~wheel_engine.cli.pg.scrub`.
    """

    @functools.wraps(command)
    def run(args: argparse.Namespace, out: Output) -> int:
        url: str = args.db
        try:
            return command(args, out)
        except CliError as exc:
            raise CliError(scrub(str(exc), url), code=exc.code) from None
        except JournalError as exc:
            raise CliError(scrub(str(exc), url), code=EXIT_ERROR) from None
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            if args.debug:
                raise
            text = f"{type(exc).__name__}: {exc} (run with --debug for the traceback)"
            raise CliError(scrub(text, url), code=EXIT_ERROR) from None

    return run


def shown_args(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``db`` masked, for the SQLite commands' reporting helpers that print it."""
    return argparse.Namespace(**{**vars(args), "db": mask_url(args.db)})
