"""`Store.expire` / `Workbench.expire`: expiring workbenches (docs/metadata-format.md, "Workbench
Expiry"), on an embedded and on a connected store. The clock-driven path (a deadline passing,
the clock set back, GC) is the faketime test of the CLI (`nokv/cli/tests/expire_faketime.rs`);
here a deadline already passed expires a workbench at once."""

from __future__ import annotations

import datetime

import pytest

import nokv

#: Every test runs on both backends.
pytestmark = pytest.mark.both_backends


def _listed(store: nokv.Store) -> list:
    return [m["workbench_id"] for m in store.call_tool("workbench_find", {})["matches"]]


def test_a_deadline_is_recorded_moved_and_removed(store: nokv.Store, wb: nokv.Workbench) -> None:
    out = store.expire("wb", after="2h")
    assert out["workbench_id"] == "wb"
    assert out["expired"] is False
    assert out["changed"] is True
    assert out["previous_expires_at"] is None
    assert out["expires_at"].endswith("Z")
    assert out["expires_at_unix_ms"] - out["clock_unix_ms"] == 2 * 3600 * 1000
    moved = wb.expire(after=datetime.timedelta(days=7))
    assert moved["previous_expires_at"] == out["expires_at"]
    assert moved["expires_at_unix_ms"] - moved["clock_unix_ms"] == 7 * 86400 * 1000
    never = wb.expire(never=True)
    assert never["expires_at"] is None and never["changed"] is True
    again = wb.expire(never=True)
    assert again["changed"] is False and again["commit_version"] is None
    # Still live and listed.
    wb.put("outputs/a.txt", "a")
    assert "wb" in _listed(store)


def test_a_past_deadline_expires_at_once_and_every_call_says_why(
    store: nokv.Store, wb: nokv.Workbench
) -> None:
    wb.put("outputs/a.txt", "a")
    out = store.expire("wb", at=datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc))
    assert out["expired"] is True
    assert out["expires_at"] == "2020-01-01T00:00:00Z"
    assert "wb" not in _listed(store)
    with pytest.raises(nokv.NotFound) as err:
        store.workbench("wb")
    assert err.value.details["reason"] == "expired"
    assert err.value.details["expired_at"] == "2020-01-01T00:00:00Z"
    assert "expired at 2020-01-01T00:00:00Z" in err.value.message
    with pytest.raises(nokv.NotFound):
        wb.read_text("outputs/a.txt")
    with pytest.raises(nokv.NotFound) as err:
        wb.put("outputs/b.txt", "b")
    # The data path of a connected store carries the code and message (not the details).
    assert "expired at 2020-01-01T00:00:00Z" in err.value.message
    # Not revivable, and the name is not reused.
    with pytest.raises(nokv.NotFound):
        store.expire("wb", never=True)
    with pytest.raises(nokv.AlreadyExists) as err:
        store.create_workbench("wb")
    assert err.value.details["reason"] == "expired"


def test_arguments_are_checked_before_anything_is_written(
    store: nokv.Store, wb: nokv.Workbench
) -> None:
    with pytest.raises(nokv.InvalidArguments):
        store.expire("wb")
    with pytest.raises(nokv.InvalidArguments):
        store.expire("wb", after="2h", never=True)
    with pytest.raises(nokv.InvalidArguments):
        store.expire("wb", after="soon")
    with pytest.raises(nokv.InvalidArguments):
        store.expire("wb", at="tomorrow")
    with pytest.raises(nokv.InvalidArguments):
        store.expire("wb", at=datetime.datetime(2030, 1, 1))
    with pytest.raises(nokv.NotFound):
        store.expire("absent", after="1h")
    assert "wb" in _listed(store)
