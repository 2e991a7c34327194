"""`flink-agents cluster up` honours the config file's ports and slots, takes `--rest-port`, and
refuses a port another process holds."""

import json
import socket
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from flink_agents.cli import main
from flink_agents.testing import ClusterError, StandaloneCluster, free_port


def written(cluster: StandaloneCluster) -> dict:
    return yaml.safe_load((cluster.conf_dir / "config.yaml").read_text())


def test_the_config_files_nested_and_flat_keys_win_over_the_defaults(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "rest:\n  port: 18082\n  address: 127.0.0.1\n"  # nested, as conf/config.yaml
        "jobmanager.rpc.port: 16124\n"  # flat: Flink 2 reads both
        "taskmanager:\n  numberOfTaskSlots: 3\n"
        "python.executable: /opt/python/bin/python3\n"
    )
    cluster = StandaloneCluster(tmp_path / "work", config)
    cluster.write_config()
    conf = written(cluster)
    assert (cluster.rest_port, cluster.rpc_port, cluster.slots) == (18082, 16124, 3)
    assert cluster.rest_url == "http://127.0.0.1:18082"
    assert conf["rest.port"] == 18082
    assert conf["rest.address"] == "127.0.0.1"
    assert conf["jobmanager.rpc.port"] == 16124
    assert conf["taskmanager.numberOfTaskSlots"] == 3
    assert conf["python.executable"] == "/opt/python/bin/python3"
    # What the file leaves unset: our defaults over pyflink's (which say 1 slot, 1600m).
    assert conf["rest.bind-address"] == "localhost"
    assert conf["python.client.executable"] == sys.executable
    assert conf["jobmanager.memory.process.size"] == "1600m"
    assert conf["io.tmp.dirs"] == str(cluster.tmp_dir)


def test_without_a_file_the_defaults_are_flinks_ports_and_two_slots(tmp_path):
    cluster = StandaloneCluster(tmp_path)
    assert (cluster.rest_port, cluster.rpc_port, cluster.slots) == (8081, 6123, 2)
    assert cluster.rest_url == "http://localhost:8081"


def test_arguments_win_over_the_file_and_overrides_over_both(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("rest.port: 18082\nrest.bind-port: 18082\ntaskmanager.numberOfTaskSlots: 3\n")
    cluster = StandaloneCluster(
        tmp_path, config, rest_port=18090, slots=4, overrides={"taskmanager.numberOfTaskSlots": 5}
    )
    assert (cluster.rest_port, cluster.slots) == (18090, 5)
    assert cluster.config["rest.port"] == cluster.config["rest.bind-port"] == 18090


def test_port_zero_in_the_file_or_as_an_argument_picks_a_free_port(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("rest:\n  port: 0\n  bind-port: 0\njobmanager.rpc.port: 0\n")
    cluster = StandaloneCluster(tmp_path, config)
    assert cluster.config["rest.port"] == cluster.config["rest.bind-port"] == cluster.rest_port
    assert 0 not in (cluster.rest_port, cluster.rpc_port)
    assert cluster.rest_port != cluster.rpc_port


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rest.bind-port: 8081-8090\n",
            "`rest.bind-port` must be one port number (got '8081-8090')",
        ),
        ("rest.port: 70000\n", "`rest.port` must be a port number from 0 to 65535 (got 70000)"),
        (
            "rest.port: 16200\njobmanager.rpc.port: 16200\n",
            "the REST API and the RPC server would both listen on port 16200: give `rest.port` "
            "and `jobmanager.rpc.port` different ports",
        ),
        ("taskmanager.numberOfTaskSlots: two\n", "`taskmanager.numberOfTaskSlots` must be a whole"),
    ],
)
def test_a_config_that_names_no_usable_port_or_slot_count_is_refused(tmp_path, text, message):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(ClusterError) as caught:
        StandaloneCluster(tmp_path, config)
    assert str(caught.value).startswith(message)


class _FlinkLookalike(BaseHTTPRequestHandler):
    """Answers every path as a JobManager with one TaskManager `tm-1` of 2 slots would."""

    def do_GET(self):
        body = json.dumps({"taskmanagers": [{"id": "tm-1", "slotsNumber": 2}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def foreign_server():
    """Another process's HTTP server on a loopback port, answering like Flink's REST API."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FlinkLookalike)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def cluster_up(tmp_path, config_text: str, *options: str) -> int:
    config = tmp_path / "user-config.yaml"
    config.write_text(config_text)
    return main(
        ["cluster", "up", "--work-dir", str(tmp_path / "work"), "--config", str(config), *options]
    )


def test_up_fails_fast_naming_the_rest_port_another_server_holds(tmp_path, capsys):
    with foreign_server() as port:
        started = time.monotonic()
        try:
            code = cluster_up(tmp_path, f"rest.port: {port}\njobmanager.rpc.port: {free_port()}\n")
        finally:
            StandaloneCluster(tmp_path / "work").stop()  # in case it started one anyway
        elapsed = time.monotonic() - started
        out, err = capsys.readouterr()
        assert code == 2
        assert "Flink cluster up" not in out
        assert err == (
            f"error: port {port} on localhost is in use by another process; the cluster's REST "
            f"API needs it: choose another with `--rest-port N` or `rest.port` in "
            f"{tmp_path / 'user-config.yaml'}\n"
        )
        assert elapsed < 5
        assert not list((tmp_path / "work").glob("pids/*.pid"))  # no daemon was started
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/overview", timeout=5) as answer:
            assert answer.status == 200  # the other server is left alone


def test_up_fails_fast_naming_the_rpc_port_another_process_holds(tmp_path, capsys):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        rpc_port = holder.getsockname()[1]
        try:
            code = cluster_up(
                tmp_path, f"rest.port: {free_port()}\njobmanager.rpc.port: {rpc_port}\n"
            )
        finally:
            StandaloneCluster(tmp_path / "work").stop()
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"error: port {rpc_port} on localhost is in use by another process; the cluster's RPC "
        f"needs it: choose another with `jobmanager.rpc.port` in "
        f"{tmp_path / 'user-config.yaml'}\n"
    )


def test_up_with_a_config_file_that_does_not_exist_says_so(tmp_path, capsys):
    missing = tmp_path / "nowhere.yaml"
    assert main(["cluster", "up", "--work-dir", str(tmp_path), "--config", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: no config file {missing}\n"


def get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return json.loads(answer.read())


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.flink
def test_up_with_a_config_on_other_ports_comes_up_there_and_down_stops_it(tmp_path, capsys):
    rest_port, rpc_port = free_port(), free_port()
    work = tmp_path / "work"
    try:
        code = cluster_up(
            tmp_path,
            f"rest:\n  port: {rest_port}\n"
            f"jobmanager.rpc.port: {rpc_port}\n"
            "taskmanager:\n  numberOfTaskSlots: 3\n",
        )
        out = capsys.readouterr().out
        assert code == 0
        assert f"Flink cluster up: http://localhost:{rest_port}, 3 slot(s)" in out
        overview = get(rest_port, "/overview")
        assert (overview["taskmanagers"], overview["slots-total"]) == (1, 3)
        served = {e["key"]: e["value"] for e in get(rest_port, "/jobmanager/config")}
        assert (served["rest.port"], served["jobmanager.rpc.port"]) == (
            str(rest_port),
            str(rpc_port),
        )
        assert listening(rpc_port)

        assert main(["cluster", "status", "--work-dir", str(work)]) == 0
        assert f"Flink cluster http://localhost:{rest_port}: up" in capsys.readouterr().out
        assert main(["cluster", "down", "--work-dir", str(work)]) == 0
        assert not listening(rest_port) and not listening(rpc_port)
        assert StandaloneCluster.from_work_dir(work).taskmanager_pids() == []
    finally:
        StandaloneCluster(work).stop()


@pytest.mark.slow
@pytest.mark.flink
def test_rest_port_option_wins_over_the_config_files_port(tmp_path, capsys):
    file_port, option_port = free_port(), free_port()
    work = tmp_path / "work"
    try:
        code = cluster_up(
            tmp_path,
            f"rest.port: {file_port}\njobmanager.rpc.port: {free_port()}\n",
            "--rest-port",
            str(option_port),
        )
        assert code == 0, capsys.readouterr().err
        assert get(option_port, "/overview")["slots-total"] == 2  # the default slot count
        assert not listening(file_port)
        # A second `up` of the same work directory does not start another cluster.
        assert main(["cluster", "up", "--work-dir", str(work), "--rest-port", "0"]) == 2
        assert "runs already" in capsys.readouterr().err
    finally:
        StandaloneCluster(work).stop()
    assert not listening(option_port)
