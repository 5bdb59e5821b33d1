"""`make quickstart`: broker + descriptor server + sample bookings + the quickstart job, then clean up."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dagger.devtools.broker import Broker
from dagger.devtools.descriptor_server import DescriptorServer
from dagger.devtools.produce import produce
from dagger.devtools.samples import bookings

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "dagger-quickstart-bookings"


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="dagger-quickstart-"))
    print("[quickstart] starting the embedded Kafka-compatible broker (tansu)", flush=True)
    with Broker(log_path=workdir / "tansu.log") as broker, DescriptorServer(ROOT / "descriptors") as stencil:
        broker.create_topic(TOPIC, partitions=2)
        start = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
        count = produce(
            broker.bootstrap, TOPIC, ((None, v) for v in bookings(600, start, step_seconds=0.5)), partitions=2
        )
        print(
            f"[quickstart] produced {count} bookings (5 minutes of event time) to {TOPIC} on {broker.bootstrap}",
            flush=True,
        )
        print(f"[quickstart] descriptors served at {stencil.url('examples.desc')}", flush=True)
        env = dict(os.environ, KAFKA_BOOTSTRAP=broker.bootstrap, DESCRIPTOR_URL=stencil.url("examples.desc"))
        cmd = [
            sys.executable,
            "-m",
            "dagger",
            "run",
            str(ROOT / "configs" / "quickstart.json"),
            "--available-now",
            "--checkpoint-dir",
            str(workdir / "checkpoint"),
        ]
        print("[quickstart] running: dagger run configs/quickstart.json --available-now", flush=True)
        code = subprocess.call(cmd, env=env, cwd=ROOT)
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"[quickstart] done (exit code {code}); broker and descriptor server stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
