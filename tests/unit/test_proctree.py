"""The bench's memory sums (``testing.proctree``) count a task that runs in another's memory once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from testing import proctree


def test_a_thread_shares_its_process_memory_and_a_forked_child_does_not():
    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def run() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        done.wait(10)

    thread = threading.Thread(target=run)
    thread.start()
    ready.wait(10)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert proctree.shares_memory(tid[0], os.getpid())  # a task of this process: one address space
        assert not proctree.shares_memory(child.pid, os.getpid())  # forked and exec'd: its own
        # the tree's own-memory list keeps the child (its parent is this process, whose memory it does not share)
        assert child.pid in proctree._own_memory(proctree.tree(os.getpid()))
    finally:
        done.set()
        thread.join()
        child.kill()
        child.wait()
