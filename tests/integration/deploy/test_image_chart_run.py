"""The image's build steps, and the chart's local mode run for real: what the chart renders, in the image's
environment, against Apache Kafka.

There is no Docker engine or cluster here, so the image is built the way its Dockerfile builds it (``make
image-root``, the target the Dockerfile's build stage runs) into a temporary ``/opt/dagger``, with the final
stage's ``ENV`` read from the Dockerfile. The chart is rendered, and what a kubelet would do is done by hand:
each volume mount is materialized under a temporary root (ConfigMaps written as files, claims as directories),
the container's environment is built from ``env`` and ``envFrom`` (a Secret given here), ``$(VAR)`` references
expanded, and the container's command run. The test then reads the job's output records, scrapes the metrics port
the chart opened, and stops the pod the way Kubernetes does (SIGTERM): the job must exit 0.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import urllib.request
import zipfile
from pathlib import Path

import pytest

from testing.broker import free_port
from testing.produce import consume_all, produce
from testing.samples import bookings
from tests.conftest import ROOT, START, kafka_stream
from tests.project.test_helm_chart import one, render

# the image's /opt/dagger built by its make target (a venv installed, the helper compiled): over a minute before the
# first test, so make test-long (CI runs it) runs this file
pytestmark = [pytest.mark.integration, pytest.mark.long]


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    """``/opt/dagger`` of the image, built by the Dockerfile's own make target."""
    root = tmp_path_factory.mktemp("image") / "opt-dagger"
    made = subprocess.run(
        ["make", "-s", "image-root", f"IMAGE_ROOT={root}"], cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    assert made.returncode == 0, f"make image-root failed:\n{made.stdout[-2000:]}\n{made.stderr[-4000:]}"
    return root


def dockerfile_env(image_root: Path) -> dict[str, str]:
    """The final stage's ENV, with /opt/dagger at ``image_root``."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    final = text.rsplit("\nFROM ", 1)[1]
    env: dict[str, str] = {}
    for line in final.splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, value = pair.split("=", 1)
                env[key] = value.replace("/opt/dagger", str(image_root)).replace("$PATH", os.environ["PATH"])
    return env


def test_the_image_root_holds_the_venv_the_prebuilt_helper_and_the_entry(image_root):
    assert (image_root / "entry.py").read_text() == (ROOT / "dagger" / "entry.py").read_text()
    assert list((image_root / "native").glob("arrow_kafka-*.so")), "the Kafka helper was not built at build time"
    assert list((image_root / "native").glob("worker-python-*")), "the worker launcher was not written at build time"
    jars = {j.name.rsplit("-", 1)[0] for j in (image_root / "jars").glob("*.jar")}
    assert {"spark-sql-kafka-0-10_2.13", "spark-avro_2.13", "kafka-clients", "commons-pool2"} <= jars, jars
    from dagger.session.jars import helper_name

    helper = image_root / "jars" / helper_name()  # Dagger's JVM classes, built from this tree's sources
    with zipfile.ZipFile(helper) as built:
        assert "dagger/longbow/StateHistory.class" in built.namelist()
    env = dockerfile_env(image_root)
    assert env["DAGGER_JARS"] == str(image_root / "jars")
    assert Path(env["SPARK_HOME"], "bin", "spark-submit").exists()  # SPARK_HOME is the image's pyspark
    assert Path(env["PYSPARK_PYTHON"]).exists() and Path(env["JAVA_HOME"], "bin", "java").exists()
    version = subprocess.run(
        [str(image_root / "venv" / "bin" / "dagger"), "--help"], capture_output=True, text=True, env=env
    )
    assert version.returncode == 0 and "dagger run" in version.stdout


class Pod:
    """What a kubelet does with the rendered pod, on this machine under ``root``."""

    def __init__(self, docs: list[dict], root: Path, secrets: dict[str, dict[str, str]], base_env: dict[str, str]):
        self.spec = one(docs, "Deployment")["spec"]["template"]["spec"]
        (self.container,) = self.spec["containers"]
        self.config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
        self.root, self.secrets = root, secrets
        self.mounts = self._mount()
        self.env = self._environment(base_env)

    def _mount(self) -> dict[str, str]:
        volumes = {v["name"]: v for v in self.spec["volumes"]}
        mapped = {}
        for mount in self.container["volumeMounts"]:
            target = self.root / mount["mountPath"].lstrip("/")
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                data = self.config_maps[volume["configMap"]["name"]]
                if "subPath" in mount:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(data[mount["subPath"]])
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    for key, value in data.items():
                        (target / key).write_text(value)
            else:  # a claim or an emptyDir: a directory that outlives the process (the claim's contents)
                target.mkdir(parents=True, exist_ok=True)
            mapped[mount["mountPath"]] = str(target)
        return mapped

    def path(self, text: str) -> str:
        for mount in sorted(self.mounts, key=len, reverse=True):
            if text == mount or text.startswith(mount + "/"):
                return self.mounts[mount] + text[len(mount) :]
        return text

    def _environment(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        for source in self.container.get("envFrom", []):
            env.update(self.secrets[source["secretRef"]["name"]])
        fields = {"metadata.name": "bookings-dagger-0", "metadata.namespace": "jobs", "status.podIP": "127.0.0.1"}
        for entry in self.container.get("env", []):
            value = entry.get("value")
            if "valueFrom" in entry:
                value = fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
            env[entry["name"]] = self.path(self.expand(value, env))
        return env

    @staticmethod
    def expand(text: str, env: dict[str, str]) -> str:
        return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)

    def command(self) -> list[str]:
        argv = [self.path(self.expand(a, self.env)) for a in [*self.container["command"], *self.container["args"]]]
        found = next(
            (str(Path(d) / argv[0]) for d in self.env["PATH"].split(":") if (Path(d) / argv[0]).exists()), None
        )
        assert found, f"{argv[0]} is not on the image's PATH"
        return [found, *argv[1:]]


def test_the_local_mode_pod_runs_the_job_serves_metrics_and_stops_cleanly_on_sigterm(
    image_root, broker, stencil, topic, tmp_path
):
    source, out = topic("chart-src", partitions=2), topic("chart-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(40, START, step_seconds=30)), partitions=2)
    metrics_port = free_port()
    values = {
        "job": {
            "config": {
                "FLINK_JOB_ID": "chart-bookings",
                "FLINK_SQL_QUERY": "SELECT order_number, service_type FROM data_stream_0",
                "STREAMS": [kafka_stream(broker, source)],
                "SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("examples.desc"),
                "SINK_TYPE": "kafka",
                "SINK_KAFKA_BROKERS": broker.bootstrap,
                "SINK_KAFKA_TOPIC": "${OUT_TOPIC}",  # from the Secret, through envFrom
                "SINK_KAFKA_DATA_TYPE": "JSON",
            }
        },
        "metrics": {"enabled": True, "port": metrics_port},
        "spark": {"conf": {"spark.sql.shuffle.partitions": 2}},
        "existingSecret": "bookings-secrets",
    }
    docs = render(values)
    base_env = {**dockerfile_env(image_root), "CC": "/nonexistent/cc"}  # no compiler in the image
    pod = Pod(docs, tmp_path / "root", {"bookings-secrets": {"OUT_TOPIC": out}}, base_env)
    job_json = json.loads(Path(pod.path("/etc/dagger/job.json")).read_text())
    assert job_json == values["job"]["config"]
    assert "spark.sql.shuffle.partitions 2" in Path(pod.path("/etc/dagger/spark/spark-defaults.conf")).read_text()
    native_before = sorted(p.name for p in (image_root / "native").iterdir())
    workdir = tmp_path / "root" / "opt" / "dagger" / "work"
    workdir.mkdir(parents=True)
    process = subprocess.Popen(
        pod.command(), env=pod.env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=40, timeout=240)]
        assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(40))
        annotations = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(metrics_port)
        scrape = f"http://127.0.0.1:{annotations['prometheus.io/port']}{annotations['prometheus.io/path']}"
        scraped = urllib.request.urlopen(scrape, timeout=10).read().decode()  # what Prometheus would scrape
        assert 'dagger_up{job_id="chart-bookings"} 1.0' in scraped, scraped[:1000]
        assert 'dagger_sink_records_total{job_id="chart-bookings",outcome="written",sink="kafka"} 40.0' in scraped
        assert process.poll() is None, "the job stopped on its own"
        process.send_signal(signal.SIGTERM)  # what Kubernetes does to a pod it stops
        stdout, stderr = process.communicate(timeout=120)
    except AssertionError as failure:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
        raise AssertionError(f"{failure}\n--- the job's stderr ---\n{stderr[-6000:]}") from None
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-4000:]
    assert "the columnar Kafka client is unavailable" not in stderr  # the helper built into the image was used
    assert sorted(p.name for p in (image_root / "native").iterdir()) == native_before  # nothing written at run time
    checkpoint = Path(pod.path("/var/lib/dagger/checkpoints/gen-1"))
    assert (checkpoint / "offsets").is_dir() and (checkpoint / "commits").is_dir()  # the checkpoint is on the claim
    assert "chart-bookings" in stderr
