"""journal.postgres.target: the password leaves the URL before libpq parses it (issue 21)."""

from __future__ import annotations

import psycopg
import pytest

from journal.postgres.errors import StoreUnavailable, translated
from journal.postgres.target import MASK, Target

ODD = "s3 cr%t@p:a/ss-wörd"


@pytest.mark.parametrize(
    ("url", "bare", "password"),
    [
        (f"postgresql://u:{ODD}@h:5/db", "postgresql://u@h:5/db", ODD),
        ("postgresql://u:s3%20cr%25t%40p@h/db", "postgresql://u@h/db", "s3 cr%t@p"),
        ("postgres://u:pa%ss@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable", "pa%ss"),
        (
            "postgresql://u@h/db?password=p%40ss&application_name=x",
            "postgresql://u@h/db?application_name=x",
            "p@ss",
        ),
        ("postgresql://u@h/db?password=p@ss", "postgresql://u@h/db", "p@ss"),
        ("postgresql://h/db", "postgresql://h/db", None),
        ("postgresql://u@h/db", "postgresql://u@h/db", None),
    ],
)
def test_the_password_is_taken_out_of_the_url(url: str, bare: str, password: str | None) -> None:
    target = Target(url)
    assert (target.url, target.password) == (bare, password)
    assert target.kwargs() == ({} if password is None else {"password": password})
    assert "h" in target.where and (password is None or password not in repr(target))


def test_translated_masks_the_driver_text_and_chains_nothing() -> None:
    target = Target(f"postgresql://u:{ODD}@h/db")
    with pytest.raises(StoreUnavailable) as caught, translated("h/db", "connecting", target.scrub):
        raise psycopg.OperationalError(f'invalid token: "{ODD}"')
    error = caught.value
    assert ODD not in str(error) and MASK in str(error)
    assert error.__cause__ is None and error.__suppress_context__
    assert ODD not in str(error.__context__)  # masked in place: Python keeps it as context
