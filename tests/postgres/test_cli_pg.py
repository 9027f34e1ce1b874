"""The CLI on a PostgreSQL journal: the read commands, check and the writes, beside a live node.

Each test opens a real node (``PostgresStore``) on a fresh database of the throwaway cluster,
gives it a timer in every state, and runs ``wheel-engine`` (``main``) on the URL while the node
holds its partitions. psycopg and the helpers are imported inside the tests: without the driver
or the server every test here skips with conftest's one line, except the two that need
neither (URL masking, and the driver's import blocked in a process of its own).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import msgpack
import pytest

from wheel_engine.cli import main
from wheel_engine.cli.pg import mask_url, scrub

if TYPE_CHECKING:
    from journal.postgres import PostgresStore

#: A password that must never show: the test cluster trusts loopback, so it is not checked.
SECRET = "s3cret-Pw-4711"


def with_password(url: str) -> str:
    return url.replace("postgres@", f"postgres:{SECRET}@", 1)


async def journal_with_every_state(url: str) -> PostgresStore:
    """Node ``node-a`` holding all 4 partitions, with timers:
    done:1 SUCCEEDED, dead:bad DEAD, run:1 RUNNING (handler slow), gone:1 CANCELED,
    late:1 overdue PENDING, later:1 PENDING in an hour, mail:1 PENDING in two hours."""
    from pg_support import db_now, open_store

    from journal.postgres import Outcome

    s = await open_store(url, "node-a", partitions=4, lease=60.0)
    await s.maintain()
    now = db_now(url)

    def req(key: str, handler: str, due: float, payload: Any = None) -> Any:
        packed = None if payload is None else msgpack.packb(payload)
        return s.request(key, handler, due, packed)

    scheduled = await s.schedule_many(
        [
            req("done:1", "ok", now - 5, {"order": "A1"}),
            req("dead:bad", "bad", now - 4, {"order": "B2"}),
            req("run:1", "slow", now - 3),
            req("gone:1", "ok", now + 3600),
            req("late:1", "ok", now - 30, {"order": "L1"}),  # the oldest overdue
            req("later:1", "ok", now + 3600, {"order": "C3"}),
            req("mail:1", "mail", now + 7200, {"to": "ann"}),
        ]
    )
    versions = {d.timer.key: d.timer.version for d in scheduled}
    assert await s.cancel("gone:1") == "CANCELED"
    result = await s.attempt([(k, versions[k]) for k in ("done:1", "dead:bad", "run:1")])
    epoch = {c.key: c.epoch for c in result.claimed}
    await s.finish(
        [
            Outcome("done:1", versions["done:1"], epoch["done:1"], "SUCCEEDED"),
            Outcome("dead:bad", versions["dead:bad"], epoch["dead:bad"], "DEAD", "no order B2"),
        ]
    )
    return s


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)


# -- status ----------------------------------------------------------------------------------------


async def test_status_counts_states_handlers_overdue_and_shows_the_partitions(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from journal.postgres import SCHEMA_VERSION

    s = await journal_with_every_state(pg_url)
    try:
        code, data = run_json(capsys, "status", pg_url)
        last = (await s.summary()).last_version
    finally:
        await s.close()
    assert code == 0
    assert data["states"] == {
        "PENDING": 3,
        "RUNNING": 1,
        "SUCCEEDED": 1,
        "CANCELED": 1,
        "DEAD": 1,
    }
    assert data["timers"] == 7 and data["max_version"] == last
    assert data["handlers"]["bad"]["DEAD"] == 1 and data["handlers"]["ok"]["PENDING"] == 2
    assert data["overdue"] == 1 and data["oldest_overdue"]["key"] == "late:1"
    assert 29 < data["oldest_overdue"]["late_seconds"] < 120
    assert data["next_due"]["key"] == "later:1"  # due with gone:1, but gone:1 is CANCELED
    assert data["unhandled"] is None
    assert data["owners"] == {"node-a": 4} and data["live_nodes"] == ["node-a"]
    assert [p["partition"] for p in data["partitions"]] == [0, 1, 2, 3]
    assert all(p["held"] and p["epoch"] >= 1 and p["owner"] == "node-a" for p in data["partitions"])
    assert all(50 < p["lease_left_seconds"] <= 60 for p in data["partitions"])
    assert data["schema_version"] == SCHEMA_VERSION and data["backend"] == "postgresql"


async def test_status_shows_the_cluster_wide_limits_with_their_tokens_and_running(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from journal.postgres.limiting import ClusterLimits

    s = await journal_with_every_state(pg_url)
    try:
        code, data = run_json(capsys, "status", pg_url)
        assert code == 0 and data["limits"] == {}  # none registered: no table shown
        await s.register_limits(
            {"slow": ClusterLimits(None, None, 3), "ok": ClusterLimits(5.0, 2, None)}
        )
        code, data = run_json(capsys, "status", pg_url)
        human, out, _ = run(capsys, "status", pg_url)
    finally:
        await s.close()
    assert code == 0 and human == 0
    assert data["limits"] == {
        "ok": {
            "scope": "cluster",
            "concurrency": None,
            "rate": 5.0,
            "burst": 2,
            "tokens": 2.0,
            "running": 0,
        },
        # run:1 is RUNNING under node-a's live lease: it takes one of the three slots
        "slow": {
            "scope": "cluster",
            "concurrency": 3,
            "rate": None,
            "burst": None,
            "tokens": None,
            "running": 1,
        },
    }
    assert "limits across the cluster" in out and "slow" in out


async def test_status_reports_unhandled_live_timers_against_the_given_handlers(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = await journal_with_every_state(pg_url)
    try:
        code, data = run_json(capsys, "status", pg_url, "--handlers", "ok, bad")
    finally:
        await s.close()
    assert code == 0
    assert data["unhandled_handlers"] == ["mail", "slow"]  # live only: not bad (DEAD)
    assert data["unhandled"] == 2


async def test_status_human_groups_partitions_by_owner_and_shows_a_lapsed_lease(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import expire_leases

    s = await journal_with_every_state(pg_url)
    try:
        code, out, _ = run(capsys, "status", pg_url)
        assert code == 0
        assert "node-a" in out and "0-3" in out and "left" in out
        assert "late:1 (ok)" in out and "pending" in out  # the overdue line, the counts
        assert "slow" in out  # the per-handler table
        expire_leases(pg_url, "node-a")
        code, out, _ = run(capsys, "status", pg_url)
    finally:
        await s.close()
    assert code == 0
    assert "node-a (lapsed)" in out and "ago" in out
    assert "0 held under a live lease" in out


async def test_status_of_an_empty_journal_says_no_version_was_issued(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import open_store

    from journal.postgres import PostgresClient

    await (await open_store(pg_url, "a", partitions=2)).close()
    code, data = run_json(capsys, "status", pg_url)
    assert code == 0 and data["timers"] == 0 and data["max_version"] == 0
    assert data["owners"] == {} and all(p["owner"] is None for p in data["partitions"])
    with PostgresClient.connect(pg_url) as client:  # the summary read the sequence as 1
        assert client.summary().last_version == 0


# -- list and show ---------------------------------------------------------------------------------


async def test_list_in_due_order_with_state_handler_and_limit(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = await journal_with_every_state(pg_url)
    try:
        code, every = run_json(capsys, "list", pg_url)
        _, dead = run_json(capsys, "list", pg_url, "--state", "dead")
        _, ok = run_json(capsys, "list", pg_url, "--handler", "ok", "--limit", "2")
        _, none = run_json(capsys, "list", pg_url, "--handler", "nobody")
        bad, _, err = run(capsys, "list", pg_url, "--state", "LOST")
        human, out, _ = run(capsys, "list", pg_url, "--limit", "3")
    finally:
        await s.close()
    assert code == 0
    keys = [t["key"] for t in every["timers"]]
    assert keys == ["late:1", "done:1", "dead:bad", "run:1", "gone:1", "later:1", "mail:1"]
    assert every["total"] == every["shown"] == 7
    [d] = dead["timers"]
    assert d["key"] == "dead:bad" and d["last_error"] == "no order B2" and d["attempts"] == 1
    assert d["payload"] == {"order": "B2"} and d["partition"] in range(4)
    assert [t["key"] for t in ok["timers"]] == ["late:1", "done:1"]
    assert (ok["total"], ok["shown"]) == (4, 2)
    assert none == {"total": 0, "shown": 0, "timers": []}
    assert bad == 2 and "unknown state" in err
    assert human == 0 and "late:1" in out and "mail:1" not in out


async def test_show_prints_the_row_its_owner_and_says_there_is_no_history(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = await journal_with_every_state(pg_url)
    try:
        code, data = run_json(capsys, "show", pg_url, "run:1")
        human, out, _ = run(capsys, "show", pg_url, "dead:bad")
        missing, _, err = run(capsys, "show", pg_url, "nope")
    finally:
        await s.close()
    assert code == 0
    assert data["state"] == "RUNNING" and data["attempts"] == 1
    assert data["run_epoch"] == data["partition_owner"]["epoch"] >= 1
    assert data["partition_owner"]["owner"] == "node-a" and data["partition_owner"]["held"]
    assert data["history"] is None and data["cancel_requested"] is False
    assert human == 0
    assert "no order B2" in out and '{"order": "B2"}' in out
    assert "partition owner" in out and "node-a (holds it, epoch" in out
    assert "no history: PostgreSQL keeps each timer's current row" in out
    assert missing == 1 and "no timer with key 'nope'" in err


# -- check -----------------------------------------------------------------------------------------


async def test_check_passes_on_a_journal_in_use(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from journal.postgres import SCHEMA_VERSION

    s = await journal_with_every_state(pg_url)
    try:
        code, data = run_json(capsys, "check", pg_url)
        human, out, _ = run(capsys, "check", pg_url)
    finally:
        await s.close()
    assert code == 0 and data["ok"] and data["problems"] == [] and data["timers"] == 7
    assert human == 0 and out.startswith(
        f"ok: 7 timers decode; schema_version {SCHEMA_VERSION}, 4 partitions"
    )


#: Damage as a hand edit or a foreign tool would leave it, and what check must say about it.
DAMAGE = [
    ("UPDATE wheel_timers SET payload = '\\xc1'::bytea WHERE key = 'later:1'", "not valid msgpack"),
    ("UPDATE wheel_timers SET state = 9 WHERE key = 'mail:1'", "unknown state code 9"),
    ("UPDATE wheel_timers SET handler = '' WHERE key = 'gone:1'", "empty handler"),
    ("UPDATE wheel_timers SET partition = 7 WHERE key = 'late:1'", "partition 7 out of range"),
    ("UPDATE wheel_timers SET version = version + 1000 WHERE key = 'done:1'", "outside 1.."),
    (
        "UPDATE wheel_timers SET version = (SELECT version FROM wheel_timers WHERE key = 'mail:1')"
        " WHERE key = 'later:1'",
        "is held by several timers",
    ),
    (
        "UPDATE wheel_timers SET run_epoch = run_epoch + 5 WHERE key = 'run:1'",
        "above its partition",
    ),
    ("DELETE FROM wheel_partitions WHERE partition = 3", "does not hold partitions 0..3"),
]


async def test_check_reports_every_kind_of_damage_and_exits_1(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import sql

    s = await journal_with_every_state(pg_url)
    await s.close()
    for statement, _ in DAMAGE:
        sql(pg_url, statement)
    code, data = run_json(capsys, "check", pg_url)
    human, _, err = run(capsys, "check", pg_url)
    assert code == 1 and not data["ok"]
    for _, finding in DAMAGE:
        assert any(finding in problem for problem in data["problems"]), finding
    assert human == 1 and err.startswith("wheel-engine: error: postgresql://")
    assert "also:" in err


async def test_check_finds_a_row_filed_under_another_partition_and_a_running_row_without_epoch(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import sql

    from journal.postgres import partition_of

    s = await journal_with_every_state(pg_url)
    await s.close()
    wrong = (partition_of("later:1", 4) + 1) % 4
    sql(pg_url, "UPDATE wheel_timers SET partition = %s WHERE key = 'later:1'", (wrong,))
    sql(pg_url, "UPDATE wheel_timers SET run_epoch = NULL WHERE key = 'run:1'")
    code, data = run_json(capsys, "check", pg_url)
    assert code == 1
    assert any("its key hashes to" in p for p in data["problems"])
    assert any("RUNNING without the epoch" in p for p in data["problems"])


async def test_check_reports_an_old_schema_and_refuses_a_newer_one(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import open_store, sql

    await (await open_store(pg_url, "a", partitions=2)).close()
    sql(pg_url, "UPDATE wheel_meta SET value = 0 WHERE name = 'schema_version'")
    code, data = run_json(capsys, "check", pg_url)
    assert code == 1 and "start a node of this release to migrate" in data["problems"][0]
    sql(pg_url, "UPDATE wheel_meta SET value = 99 WHERE name = 'schema_version'")
    code, _, err = run(capsys, "check", pg_url)
    assert code == 3 and "newer wheel-engine" in err and len(err.splitlines()) == 1


# -- writes, while a node runs ---------------------------------------------------------------------


async def test_schedule_goes_to_the_store_and_the_owner_can_fire_it(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import db_now

    s = await journal_with_every_state(pg_url)
    try:
        at = f"{db_now(pg_url) - 1:.3f}"
        code, data = run_json(
            capsys, "schedule", pg_url, "ok", "--at", at, "--key", "k:1", "--payload", '{"n": 1}'
        )
        stored = await s.lookup("k:1")
        assert stored is not None and stored.version == data["version"]
        assert msgpack.unpackb(stored.payload) == {"n": 1}
        [claimed] = (await s.attempt([("k:1", stored.version)])).claimed  # the owner fires it
        assert claimed.key == "k:1"
        assert code == 0 and data["via"] == "postgresql" and data["state"] == "PENDING"
        conflict = ["schedule", pg_url, "ok", "--delay", "60", "--key", "later:1"]
        keep, kept = run_json(capsys, *conflict, "--on-conflict", "keep")
        error, _, err = run(capsys, *conflict, "--on-conflict", "error")
        fresh, out, note = run(capsys, "schedule", pg_url, "typo", "--delay", "60")
        nul, _, nul_err = run(capsys, "schedule", pg_url, "ok", "--delay", "1", "--key", "a\x00b")
    finally:
        await s.close()
    assert keep == 0 and kept["key"] == "later:1" and kept["payload"] == {"order": "C3"}
    assert error == 1 and "names a live timer" in err
    assert fresh == 0 and "scheduled cli-" in out and "handler 'typo'" in note
    assert nul == 2 and "NUL" in nul_err


async def test_delay_counts_from_the_database_clock(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import db_now, open_store

    await (await open_store(pg_url, "a", partitions=2)).close()
    before = db_now(pg_url)
    code, data = run_json(capsys, "schedule", pg_url, "ok", "--delay", "100")
    assert code == 0 and before + 100 <= data["due"] <= db_now(pg_url) + 100


async def test_cancel_pending_running_stale_and_missing(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import row_of

    s = await journal_with_every_state(pg_url)
    try:
        version = (await s.lookup("later:1")).version  # type: ignore[union-attr]
        stale, stale_data = run_json(
            capsys, "cancel", pg_url, "later:1", "--version", f"{version + 1}"
        )
        code, data = run_json(capsys, "cancel", pg_url, "later:1", "--version", f"{version}")
        running, out, _ = run(capsys, "cancel", pg_url, "run:1")
        missing, gone = run_json(capsys, "cancel", pg_url, "nope")
        done, _, _ = run(capsys, "cancel", pg_url, "done:1")
    finally:
        await s.close()
    assert stale == 1 and stale_data["result"] == "NOT_FOUND"
    assert code == 0 and data["result"] == "CANCELED" and data["timer"]["state"] == "CANCELED"
    assert (
        running == 0 and "CANCEL_REQUESTED" in out and row_of(pg_url, "run:1")["cancel_requested"]
    )
    assert missing == 1 and gone["timer"] is None
    assert done == 0  # ALREADY_DONE


async def test_redrive_one_or_all_dead_timers(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = await journal_with_every_state(pg_url)
    try:
        old = (await s.lookup("dead:bad")).version  # type: ignore[union-attr]
        not_dead, _, err = run(capsys, "redrive", pg_url, "late:1")
        none, _, none_err = run(capsys, "redrive", pg_url, "nope")
        code, data = run_json(capsys, "redrive", pg_url, "dead:bad", "--at", "2030-01-01T00:00:00Z")
        after = await s.lookup("dead:bad")
        again, nothing = run_json(capsys, "redrive", pg_url, "--all-dead", "--handler", "bad")
        usage, _, _ = run(capsys, "redrive", pg_url)
    finally:
        await s.close()
    assert not_dead == 1 and "is PENDING" in err
    assert none == 1 and "no timer with key 'nope'" in none_err
    assert code == 0 and data["redriven"] == 1
    assert after is not None and after.state == "PENDING" and after.version > old
    assert after.attempts == 0 and after.due == 1893456000.0
    assert again == 0 and nothing == {"redriven": 0, "timers": []}
    assert usage == 2


async def test_compact_says_postgresql_prunes_on_its_own(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import open_store

    await (await open_store(pg_url, "a", partitions=2)).close()
    code, out, err = run(capsys, "compact", pg_url)
    assert code == 0 and err == ""
    assert out.strip().splitlines() == [out.strip()] and "prune finished rows" in out


# -- errors: one line, no password -----------------------------------------------------------------


async def test_no_command_prints_the_password(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import db_now

    s = await journal_with_every_state(pg_url)
    url = with_password(pg_url)
    commands = [
        ["status", url],
        ["status", url, "--json"],
        ["list", url, "--json"],
        ["show", url, "run:1"],
        ["show", url, "nope"],
        ["check", url],
        ["compact", url],
        ["schedule", url, "ok", "--at", f"{db_now(pg_url) + 9:.3f}", "--key", "x"],
        ["schedule", url, "ok", "--delay", "9", "--key", "x", "--on-conflict", "error"],
        ["cancel", url, "x"],
        ["redrive", url, "--all-dead"],
        ["redrive", url, "late:1"],
        ["status", url.rsplit("/", 1)[0] + "/no_such_database"],
        ["status", url.replace("127.0.0.1:", "127.0.0.1:1", 1)],  # a port nothing listens on
    ]
    try:
        for argv in commands:
            code, out, err = run(capsys, *argv)
            assert SECRET not in out + err, argv
            assert code in (0, 1, 3), (argv, code, err)
            if code == 3:
                assert len(err.splitlines()) == 1 and "Traceback" not in err, err
            if argv[0] == "status" and code == 0 and "--json" not in argv:
                assert "postgres:***@127.0.0.1" in out
    finally:
        await s.close()


def test_mask_url_hides_every_spelling_of_the_password() -> None:
    assert mask_url("postgresql://u:p%40ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert mask_url("postgres://h/db?user=u&password=hunter22&sslmode=require") == (
        "postgres://h/db?user=u&password=***&sslmode=require"
    )
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    text = 'failed for "p@ss1" and p%40ss1 in postgresql://u:p%40ss1@h/db'
    assert "ss1" not in scrub(text, "postgresql://u:p%40ss1@h/db")


async def test_a_database_without_a_journal_is_refused_and_left_alone(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pg_support import sql

    for command in (["status"], ["check"], ["schedule", "ok", "--delay", "1"]):
        code, _, err = run(capsys, command[0], pg_url, *command[1:])
        assert code == 3 and "not a wheel-engine journal" in err
    assert sql(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]


@pytest.mark.slow
def test_without_psycopg_a_url_says_what_to_install_and_sqlite_still_works(
    tmp_path: Any,
) -> None:
    """The driver's import fails where it really would (``import psycopg``), in a process of
    its own; the SQLite path must not need the driver at all."""
    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from wheel_engine.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "assert not any(m.startswith('journal.postgres.') for m in sys.modules if m in sys.modules"
        " and sys.modules[m] is not None), 'imported the PostgreSQL journal'\n"
        "sys.exit(code)\n"
    )
    url = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
    done = subprocess.run(
        [sys.executable, "-c", script, "status", url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.splitlines()
    assert "pip install 'wheel-engine[postgres]'" in line and SECRET not in line
    missing = tmp_path / "none.db"
    done = subprocess.run(
        [sys.executable, "-c", script, "status", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3 and "no such file" in done.stderr
