"""`make quickstart`: broker + descriptor server + generated bookings + the quickstart job, then clean up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: the test servers in testing/

from testing.broker import Broker
from testing.descriptor_server import DescriptorServer

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "dagger-quickstart-bookings"


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="dagger-quickstart-"))
    print("[quickstart] starting Apache Kafka (one node, KRaft)", flush=True)
    with Broker(log_path=workdir / "kafka.log") as broker, DescriptorServer(ROOT / "descriptors") as stencil:
        print(f"[quickstart] descriptors served at {stencil.url('examples.desc')}", flush=True)
        env = dict(os.environ, KAFKA_BOOTSTRAP=broker.bootstrap, DESCRIPTOR_URL=stencil.url("examples.desc"))
        config = str(ROOT / "configs" / "quickstart.json")
        generate = [
            "--count",
            "600",
            "--partitions",
            "2",
            "--events-per-second",
            "2",
            "--start",
            "2026-11-22T10:00:00Z",
        ]
        print(
            f"[quickstart] generating 600 bookings (5 minutes of event time) to {TOPIC} on {broker.bootstrap}: "
            f"dagger generate --config configs/quickstart.json {' '.join(generate)}",
            flush=True,
        )
        code = subprocess.call([sys.executable, "-m", "dagger", "generate", "--config", config, *generate], env=env)
        if code != 0:
            return code
        cmd = [
            sys.executable,
            "-m",
            "dagger",
            "run",
            config,
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
