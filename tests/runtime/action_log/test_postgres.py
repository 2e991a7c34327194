"""PostgreSQL specifics: concurrent setup, migrations, and surviving a dropped connection."""

from __future__ import annotations

import threading

import psycopg

from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import ActionRecord
from flink_agents.runtime.action_log.postgres import MIGRATIONS, PostgresActionLog
from tests.runtime.action_log.conftest import PostgresServer
from tests.runtime.action_log.records import ident


def test_concurrent_setup_on_a_fresh_database(postgres_server: PostgresServer) -> None:
    """Task managers calling setup() at once on an empty database all succeed, once."""
    url = postgres_server.create_database()
    logs = [PostgresActionLog(url) for _ in range(4)]
    errors: list[BaseException] = []

    def setup(log: PostgresActionLog) -> None:
        try:
            log.setup()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=setup, args=(log,)) for log in logs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for log in logs:
        log.close()
    assert errors == []
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version FROM action_log_schema").fetchall()
    assert rows == [(len(MIGRATIONS),)]


def test_reconnects_after_the_connection_drops(postgres_server: PostgresServer) -> None:
    """An operation whose connection the server dropped is retried on a new connection."""
    url = postgres_server.create_database()
    with PostgresActionLog(url) as log:
        log.setup()
        log.complete(ActionRecord(ident(), MemoryDelta(), MemoryDelta(), (), (), epoch=1))
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        assert log.completed(ident()) is not None
        assert log.count("job-1") == 1
