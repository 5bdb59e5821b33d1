"""A fork server for the Python processes Spark starts as new interpreters: its worker daemons and the
daemon-less source runner.

Spark forks most Python workers from a daemon, but it starts each daemon as a new interpreter, one per worker
module (the UDF workers, ``lookup_data_sources``, ``create_data_source``, ``plan_data_source_read``,
``write_into_data_source``, the streaming sink runner: six for a one-stream job), and a streaming query's source
runner (``pyspark.sql.streaming.python_streaming_source_runner``) as a new interpreter on every query start.
Each imports pyspark, pyarrow, numpy, pandas and the job's reader/sink code first (~0.5-1 s of a 2-core machine
each, all of them while the job starts), and holds its own copy of them (~45 MiB of private memory each).

On local masters :func:`dagger.session.spark.get_session` starts this server next to the JVM (:func:`start`). It
imports those modules once and waits on a Unix socket in a private directory. Spark's worker command
(:func:`dagger.session.spark.worker_python`) hands a source runner to it: :func:`client` passes the command's
arguments, environment, working directory and its stdin/stdout/stderr, and the server forks a child that runs
the module with exactly those, as the interpreter would have. The client waits for the child and exits with
its exit code; when Spark kills the client, the server kills the child. Without a server (not started yet,
gone, refusing the request, or any error reaching it) the client runs the interpreter itself, so the fork
server is only ever a shortcut.

The server is single-threaded (forking a process with threads is unsafe) and exits when its parent does.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback

#: Modules a client may ask the server to run: the daemon-less workers of Spark's Python data sources, and the
#: worker daemon (:mod:`dagger.session.daemon`, which takes the worker module as its argument).
MODULES = ("pyspark.sql.streaming.python_streaming_source_runner", "dagger.session.daemon")
SOCKET_ENV = "DAGGER_FORKSERVER_SOCKET"
_HEADER = struct.Struct("!I")


# -- the client: what the worker command runs -------------------------------------------------------------


def client(python: str, args: list[str]) -> None:
    """Run ``python args`` through the fork server named by ``$DAGGER_FORKSERVER_SOCKET``, or directly."""
    path = os.environ.get(SOCKET_ENV)
    if path and len(args) >= 2 and args[0] == "-m" and args[1] in MODULES:
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(path)
            request = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
            socket.send_fds(conn, [_HEADER.pack(len(request))], [0, 1, 2])
            conn.sendall(request)
            forked = conn.recv(_HEADER.size, socket.MSG_WAITALL)  # the child's pid, or nothing if refused
        except OSError:
            forked = b""  # no server (yet)
        if len(forked) == _HEADER.size:
            reply = conn.recv(_HEADER.size, socket.MSG_WAITALL)  # the child's exit code
            os._exit(_HEADER.unpack(reply)[0] if len(reply) == _HEADER.size else 1)
    os.execv(python, [python, *args])  # run the interpreter itself


# -- the server -------------------------------------------------------------------------------------------


def serve(path: str, parent: int | None = None) -> None:
    """Preload, listen on ``path`` and fork a child per request until the parent process (``parent``, else this
    process's parent now) exits; a parent gone while the modules were imported ends the server at once."""
    parent = os.getppid() if parent is None else parent
    from dagger.session.daemon import preload  # start-up: loads pyspark

    for name in MODULES:
        __import__(name)
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(16)
    os.rename(path + ".tmp", path)  # clients connect only once the server listens
    children: dict[socket.socket, int] = {}
    try:
        _loop(listener, children, parent)
    finally:
        for pid in children.values():
            _kill(pid)
        os.unlink(path)
        os.rmdir(os.path.dirname(path))


def _loop(listener: socket.socket, children: dict[socket.socket, int], parent: int) -> None:
    while os.getppid() == parent:
        readable, _, _ = select.select([listener, *children], [], [], 0.5)
        for conn in readable:
            if conn is listener:
                _accept(listener, children)
            else:  # the client went away (Spark stopped the worker): stop its child
                _kill(children.pop(conn))
                conn.close()
        for conn, pid in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                try:
                    conn.sendall(_HEADER.pack(code if code >= 0 else 128 - code))
                except OSError:
                    pass
                conn.close()
                del children[conn]


def _accept(listener: socket.socket, children: dict[socket.socket, int]) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3, socket.MSG_WAITALL)
        request = json.loads(_recv_exactly(conn, _HEADER.unpack(header)[0]))
        if len(fds) != 3 or request["args"][0] != "-m" or request["args"][1] not in MODULES:
            raise ValueError("not a request for a known module")
    except (OSError, ValueError, KeyError, IndexError, struct.error):
        for fd in fds:  # a kept copy of the client's stdout would keep its reader waiting
            os.close(fd)
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in children:
            other.close()
        conn.close()
        _run_child(request, fds)
    for fd in fds:
        os.close(fd)
    children[conn] = pid
    try:
        conn.sendall(_HEADER.pack(pid))
    except OSError:
        pass  # the client is gone: the loop sees it and stops the child


def _run_child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the requested interpreter run, then exit with its code."""

    code = 0
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        # here, not at the top: the client half of this file runs by its path where no dagger is importable
        from dagger.worker_logging import (
            setup_if_worker,  # the client runs by its path, before the environment makes dagger importable
        )

        setup_if_worker()  # the server imported dagger in the driver's environment
        module = request["args"][1]
        sys.argv = [module, *request["args"][2:]]
        _extend_path(request["env"].get("PYTHONPATH", ""))
        sys.modules.pop(module, None)  # preloaded for its imports; run as a fresh __main__ (no runpy warning)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report it as the interpreter would, then exit
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _extend_path(pythonpath: str) -> None:
    """Put the request's ``PYTHONPATH`` entries this server's path lacks first on ``sys.path``, where the
    interpreter Spark asked for would have them (the server's own path came from the driver's environment)."""
    missing = [entry for entry in pythonpath.split(os.pathsep) if entry and entry not in sys.path]
    sys.path[1:1] = missing  # after the working directory, as the interpreter orders them
    if missing:
        importlib.invalidate_caches()


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = conn.recv(size, socket.MSG_WAITALL)
    if len(data) != size:
        raise OSError("short request")
    return data


def _kill(pid: int) -> None:
    """Stop a child, and the workers it forked when it leads its own process group (a worker daemon does)."""

    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def start(path: str | None = None) -> str | None:
    """Start a fork server for this process (it exits with it) on ``path`` (default: a new one, :func:`socket_path`);
    returns its socket path, or ``None``."""

    try:
        path = path or socket_path()
        subprocess.Popen(
            [sys.executable, "-m", "dagger.session.forkserver", path, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )
    except OSError:
        return None
    return path


def socket_path() -> str:
    """Where a fork server of this process listens: a socket in a private (0700) directory of its own."""
    return os.path.join(tempfile.mkdtemp(prefix="dagger-fork-"), "socket")


if __name__ == "__main__":
    # `python -I -S .../dagger/session/forkserver.py --client PYTHON ARGS...` (stdlib only: no site, no dagger package)
    if sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3:])
    serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
