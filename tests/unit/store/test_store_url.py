"""A store URL SQLAlchemy cannot parse is one line naming the store, never its password: ``postgresql://[::1`` (and
a port that is no number) raised a ValueError, where only SQLAlchemy's ArgumentError was expected, as a
traceback out of `runs`, `report` and every command that opens the store."""

from __future__ import annotations

import pytest

from tokometer.store import ResultStore
from tokometer.store.database import display_url, url_problem
from tokometer.util.errors import StoreError


@pytest.mark.parametrize("url", ["postgresql://[::1", "postgresql://h:port/db", "postgresql://bob:s3cret",
                                 "postgresql://bob:s3cret@[::1/db"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_url_that_does_not_parse_is_one_line_without_its_password(url: str, read_only: bool) -> None:
    with pytest.raises(StoreError, match=r"^the results store URL postgresql://… does not parse .*--store") as caught:
        ResultStore(url, read_only=read_only)
    assert "s3cret" not in str(caught.value) and "bob" not in str(caught.value)


def test_urls_that_parse_are_shown_as_before() -> None:
    assert url_problem("postgresql://bob:s3cret@db.example:5432/runs") is None
    assert display_url("postgresql://bob:s3cret@db.example:5432/runs") == "postgresql://bob:***@db.example:5432/runs"
    assert url_problem("sqlite:////tmp/runs.db") is None and display_url("sqlite:////tmp/runs.db") == "/tmp/runs.db"
    assert display_url("no scheme at all [") == "(a URL that does not parse)"
