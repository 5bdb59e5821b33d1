"""Python workers fork from dagger's daemon, itself forked from the fork server, so a job's heavy modules are loaded
before the first task, once for all daemons."""

from __future__ import annotations

import os

from dagger.session.daemon import PRELOAD


def _loaded(batches):
    import gc
    import sys

    import pyarrow as pa

    for _ in batches:
        missing = ",".join(m for m in PRELOAD if m not in sys.modules)
        yield pa.RecordBatch.from_pydict({"missing": [missing], "frozen": [gc.get_freeze_count()]})


def test_workers_start_with_the_preloaded_modules_frozen_out_of_the_collector(spark):
    assert spark.conf.get("spark.python.daemon.module") == "dagger.session.daemon"
    rows = spark.range(2, numPartitions=2).mapInArrow(_loaded, "missing string, frozen long").collect()
    assert [r.missing for r in rows] == ["", ""]
    # the daemon's objects are frozen, so the gc.collect() after every task skips them
    assert all(r.frozen > 50_000 for r in rows), [r.frozen for r in rows]


def test_data_source_workers_fork_from_the_preloading_daemon_too(spark):
    from pyspark.sql.datasource import DataSource

    class Probe(DataSource):  # defined here: pickled by value for the worker
        @classmethod
        def name(cls) -> str:
            return "daemon_probe"

        def schema(self) -> str:  # runs in a create_data_source worker; its column name says where
            import os
            import sys

            daemon = os.getppid()  # the worker's daemon: forked by the session's fork server, leading its group
            with open(f"/proc/{daemon}/stat") as stat:
                server = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{server}/cmdline") as f:
                forked_by = f.read().split("\0")[2]
            group = os.getpgid(daemon) == daemon
            return f"`{forked_by}/{group}/{'dagger.sinks' in sys.modules}/{'pandas' in sys.modules}` INT"

    spark.dataSource.register(Probe)
    assert spark.read.format("daemon_probe").load().columns == ["dagger.session.forkserver/True/True/True"]


def _pyspark_origin(batches):
    import pyarrow as pa
    import pyspark

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"origin": [pyspark.__file__]})


def test_workers_import_pyspark_from_the_installed_package_not_the_zip(spark):
    rows = spark.range(2, numPartitions=2).mapInArrow(_pyspark_origin, "origin string").collect()
    assert rows and all(".zip" not in r.origin and r.origin.endswith("pyspark/__init__.py") for r in rows)


def test_the_worker_python_drops_only_the_redundant_zips(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pyspark

    from dagger.session.spark import worker_python

    monkeypatch.setenv("DAGGER_NATIVE_CACHE", str(tmp_path))
    wrapper = worker_python()
    assert wrapper is not None and os.access(wrapper, os.X_OK)
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = [str(lib / "pyspark.zip"), *map(str, lib.glob("py4j-*-src.zip"))]
    jars = list(map(str, (Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar")))
    assert len(jars) == 1
    mine = tmp_path / "my path"  # entries with spaces survive
    mine.mkdir()
    (mine / "marker_module.py").write_text("VALUE = 7\n")
    env = dict(os.environ, PYTHONPATH=":".join([*zips, str(mine), *jars]))
    probe = (
        "import os, sys, pyspark, marker_module;"
        " print(pyspark.__file__, marker_module.VALUE, sys.executable, os.environ['PYTHONPATH'])"
    )
    out = subprocess.run([wrapper, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    out = out.rstrip("\n").split(" ", 3)
    assert ".zip" not in out[0] and out[1] == "7" and out[2] == sys.executable
    assert out[3] == str(mine)  # the zips and the spark-core jar dropped, the rest kept
    assert worker_python() == wrapper  # written once, reused


def test_local_masters_get_one_shuffle_partition_per_core():
    import os

    from dagger.session.spark import local_cores

    assert [local_cores(m) for m in ("local", "local[3]", "local[4, 2]", "local[*]")] == [1, 3, 4, os.cpu_count()]


# -- the fork server for the daemon-less source runner ---------------------------------------------------

PROBE = """
import os, sys, time
if __name__ == "__main__":  # the server imports it once to preload, then runs it per request
    print(os.getpid(), os.getppid(), os.getcwd(), os.environ.get("PROBE_VALUE"), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if os.environ.get("PROBE_SLEEP"):
        time.sleep(60)
    sys.exit(3)
"""


def _server(tmp_path, modules):
    """A fork server (a real process) allowed to run ``modules``; returns (process, socket path)."""
    import subprocess
    import sys
    import time

    path = str(tmp_path / "srv" / "socket")
    (tmp_path / "srv").mkdir()
    code = f"import dagger.session.forkserver as f; f.MODULES += {tuple(modules)!r}; f.serve({path!r})"
    server = subprocess.Popen([sys.executable, "-c", code], env=_env(tmp_path))
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), "the fork server did not listen"
    return server, path


def _env(tmp_path, **extra):
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[3])
    return dict(os.environ, PYTHONPATH=f"{tmp_path}:{root}", **extra)


def _client(tmp_path, module, socket_path, **env):
    import subprocess
    import sys

    code = f"import dagger.session.forkserver as f; f.MODULES += ({module!r},); f.client({sys.executable!r}, ['-m', {module!r}])"
    extra = {"DAGGER_FORKSERVER_SOCKET": socket_path} if socket_path else {}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(tmp_path, PROBE_VALUE="v1", **extra, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_fork_server_runs_a_module_with_the_clients_environment_streams_and_exit_code(tmp_path):
    (tmp_path / "fork_probe.py").write_text(PROBE)
    server, path = _server(tmp_path, ["fork_probe"])
    try:
        run = _client(tmp_path, "fork_probe", path)
        out, err = run.communicate(timeout=60)
        pid, ppid, cwd, value = out.split()
        assert run.returncode == 3 and "to stderr" in err
        assert int(ppid) == server.pid and int(pid) != run.pid  # forked by the server, not started by the client
        assert cwd == str(tmp_path) and value == "v1"
        assert not os.path.exists(f"/proc/{pid}")  # reaped
    finally:
        server.terminate()
        server.wait(30)


def test_killing_the_client_kills_its_forked_child(tmp_path):
    import signal
    import time

    (tmp_path / "fork_probe.py").write_text(PROBE)
    server, path = _server(tmp_path, ["fork_probe"])
    try:
        run = _client(tmp_path, "fork_probe", path, PROBE_SLEEP="1")
        child = int(run.stdout.readline().split()[0])
        assert os.path.exists(f"/proc/{child}")
        run.send_signal(signal.SIGTERM)  # what Spark does to stop a worker
        run.wait(30)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{child}")
    finally:
        server.terminate()
        server.wait(30)


def test_without_a_server_the_client_runs_the_interpreter_itself(tmp_path):
    (tmp_path / "fork_probe.py").write_text(PROBE)
    for socket_path in (str(tmp_path / "nothing-listens-here"), None):
        run = _client(tmp_path, "fork_probe", socket_path)
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 3 and int(out.split()[0]) == run.pid  # exec'd in place


def test_the_worker_command_forks_the_source_runner_from_the_sessions_fork_server(spark, tmp_path):
    """A fake JVM end: the runner started through Spark's worker command connects, authenticates and reports
    its pid, which must be a child of this process's fork server."""
    import socket
    import struct
    import subprocess

    from dagger.session.spark import worker_python

    path = os.environ.get("DAGGER_FORKSERVER_SOCKET")
    assert path and os.path.exists(path), "get_session starts a fork server on local masters"
    listener = socket.create_server(("127.0.0.1", 0))
    env = dict(os.environ, PYTHON_WORKER_FACTORY_PORT=str(listener.getsockname()[1]))
    env["PYTHON_WORKER_FACTORY_SECRET"] = "s3cret"
    runner = subprocess.Popen(
        [worker_python(), "-m", "pyspark.sql.streaming.python_streaming_source_runner"], env=env, stderr=subprocess.PIPE
    )
    listener.settimeout(60)
    conn, _ = listener.accept()
    stream = conn.makefile("rwb")
    size = struct.unpack("!i", stream.read(4))[0]
    assert stream.read(size) == b"s3cret"
    stream.write(struct.pack("!i", 2) + b"ok")
    stream.flush()
    pid = struct.unpack("!i", stream.read(4))[0]
    with open(f"/proc/{pid}/stat") as stat:
        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{parent}/cmdline") as cmdline:
        assert "dagger.session.forkserver" in cmdline.read()
    assert pid != runner.pid
    stream.close()
    conn.close()  # the runner fails reading its command and exits; so does the worker command
    runner.communicate(timeout=60)
    assert runner.returncode != 0
    listener.close()


def test_a_job_started_by_a_process_with_a_session_gets_its_own_fork_server(spark):
    """The benchmark and notebooks launch `dagger run` from a process whose session set PYSPARK_PYTHON to the
    worker wrapper and started a fork server: the child must fork its workers from a server of its own."""
    import subprocess
    import sys

    inherited = os.environ.get("DAGGER_FORKSERVER_SOCKET")
    assert inherited and os.environ["PYSPARK_PYTHON"].rsplit("/", 1)[-1].startswith("worker-python-")
    code = (
        "import os; from dagger.session.spark import use_worker_python; use_worker_python(); "
        "print(os.environ['PYSPARK_PYTHON']); print(os.environ['DAGGER_FORKSERVER_SOCKET'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    wrapper, own = done.stdout.split()
    assert wrapper == os.environ["PYSPARK_PYTHON"] and own != inherited


def test_every_module_the_daemon_preloads_exists():
    """A module renamed away from PRELOAD is skipped without a word (the worker imports it later, outside the frozen
    heap, at every fresh worker): the Kafka reader's move out of dagger/sources/kafka.py did just that."""
    import importlib.util

    from dagger.session.daemon import PRELOAD

    missing = [name for name in PRELOAD if importlib.util.find_spec(name) is None]
    assert not missing, f"PRELOAD names modules that do not exist: {missing}"
    assert {"dagger.kafka.source.reader", "dagger.kafka.sink"} <= set(PRELOAD)
