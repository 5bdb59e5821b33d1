"""Where a job's start-up goes: ``dagger run`` (or ``validate``) of a one-stream stateless job with records
waiting, each log line stamped with its time since launch, and the first output record's.

Starts a broker (Apache Kafka) and a descriptor server, produces ``--records`` records, then launches the job as a
user would (the README's defaults, ``local[2]``) and prints every stderr line with its offset in seconds, the
time to the first output record, and the peak memory of the job's process tree by kind of process (PSS, RSS).

    .venv/bin/python docs/investigations/startup_cost.py              # dagger run
    .venv/bin/python docs/investigations/startup_cost.py --validate   # dagger validate
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is docs/investigations/)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    from streaming import STATELESS_SQL, FirstOutput, job_config

    from dagger.generate import RecordGenerator, produce_generated
    from dagger.schema.descriptor_sets import DescriptorSet
    from testing import proctree
    from testing.broker import Broker
    from testing.descriptor_server import DescriptorServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--validate", action="store_true", help="time `dagger validate` instead of `dagger run`")
    parser.add_argument("--profile", help="write the job's cProfile statistics to this file (pstats)")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting for the job (SPARK_CONF), k=v")
    parser.add_argument(
        "--after", type=float, default=5.0, help="seconds to keep the job running after its first output"
    )
    args = parser.parse_args()
    desc = (ROOT / "descriptors" / "examples.desc").read_bytes()
    booking = DescriptorSet([("x", desc)]).find_message("dagger.examples.BookingLogMessage")
    with Broker() as broker, DescriptorServer(ROOT / "descriptors") as server:
        broker.create_topic("in", 2)
        broker.create_topic("out", 2)
        produce_generated(RecordGenerator(booking, seed=1), broker.bootstrap, "in", args.records)
        work = Path(tempfile.mkdtemp(prefix="startup-"))
        data = job_config(
            broker.bootstrap,
            server.url("examples.desc"),
            "in",
            "out",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
        )
        data["SPARK_CONF"] = dict(kv.split("=", 1) for kv in args.conf)
        (work / "job.json").write_text(json.dumps(data))
        verb = (
            ["validate", str(work / "job.json")]
            if args.validate
            else ["run", str(work / "job.json"), "--checkpoint-dir", str(work / "cp")]
        )
        launched = time.time()
        process = subprocess.Popen(
            [sys.executable, *(["-m", "cProfile", "-o", args.profile] if args.profile else []), "-m", "dagger", *verb],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []

        def pump() -> None:
            for line in process.stderr:  # type: ignore[union-attr]
                lines.append(f"{time.time() - launched:6.2f}  {line.rstrip()}")

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        first = None
        stopping = False
        memory = proctree.PeakMemory(process.pid)
        first_output = FirstOutput(broker.bootstrap, "out")
        while process.poll() is None:
            memory.sample()
            if not args.validate:
                if first is None:
                    stamp = first_output.look()
                    if stamp is not None:
                        first = stamp - launched
                elif time.time() - launched > first + args.after and not stopping:
                    process.terminate()  # once: a second SIGTERM stops the job at once
                    stopping = True
            if args.validate or first is not None:
                time.sleep(0.1)  # (looking for the first output waits 0.1 s for it)
        ended = time.time() - launched
        first_output.close()
        reader.join(5)
    print("\n".join(lines))
    if args.validate:
        print(f"validate: exit {process.returncode} after {ended:.2f} s")
    else:
        print(f"first output: {first:.2f} s after launch" if first else "no output")
    print(f"peak PSS {memory.pss / 2**20:,.0f} MiB (RSS summed {memory.rss / 2**20:,.0f} MiB); PSS / RSS by kind:")
    for kind, k in memory.by_kind_mib().items():
        print(f"  {k['pss_mib']:6} {k['rss_mib']:6}  {kind} ×{k['processes']}")


if __name__ == "__main__":
    main()
