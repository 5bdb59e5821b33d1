"""The tests mirror the package: a unit test starts no server (Apache Kafka, a Schema Registry, InfluxDB, ...);
one that needs a server lives under tests/integration/, in the same tree shape. The files still mixed are listed
and may only leave the list. Collection only: no server, no Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: fixtures that start a server (a Spark session is not one: a JVM expression is tested in the unit layer)
SERVER_FIXTURES = {"broker", "topic", "influx", "bigquery", "bigtable", "postgres", "elasticsearch", "s3", "registry"}
#: files under tests/unit with tests that still start a server (none since issue 54 split the last 12)
TO_SPLIT: set[str] = set()
_COLLECT = """
import json, sys, pytest
found = {}
class Collector:
    def pytest_collection_modifyitems(self, items):
        for item in items:
            found.setdefault(str(item.path.relative_to(sys.argv[1])), set()).update(getattr(item, "fixturenames", ()))
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/unit"], plugins=[Collector()])
print("RESULT " + json.dumps({path: sorted(names) for path, names in found.items()}))
"""


def test_unit_tests_start_no_server():
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT, str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    fixtures = json.loads(line[len("RESULT ") :])
    assert fixtures, "no unit test collected"
    serving = {path for path, names in fixtures.items() if SERVER_FIXTURES.intersection(names)}
    assert serving <= TO_SPLIT, (
        f"unit tests that start a server: {sorted(serving - TO_SPLIT)}; move them to tests/integration/ "
        "(the same path under it)"
    )
    assert TO_SPLIT <= serving, f"split already: {sorted(TO_SPLIT - serving)}; take them off TO_SPLIT"
