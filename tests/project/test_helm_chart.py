"""The Helm chart (helm/dagger), rendered offline: lint, schema, Kubernetes validity, and what each mode means.

helm-python-sdk runs Helm's own Go SDK; kubernetes-validate checks built-in objects against Kubernetes' OpenAPI
schemas (strict: unknown fields are errors) for the oldest and newest versions the chart supports; the
SparkApplication is checked against the Kubeflow operator's CRD schema, vendored at a pinned commit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml

from dagger.job import load_config
from tests.conftest import ROOT

CHART = ROOT / "helm" / "dagger"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBE_VERSIONS = ("1.25.0", "1.37.0")  # Chart.yaml's kubeVersion floor, and the newest kubernetes-validate knows
CRD = json.loads((Path(__file__).resolve().parents[1] / "helm" / "sparkapplication-v1beta2.schema.json").read_text())
MODES = ("local", "kubernetes", "operator")


def values_of(name: str) -> dict:
    return yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())


def render(values: dict, release: str = "bookings", namespace: str = "jobs") -> list[dict]:
    """Every object the chart renders for ``values`` (NOTES.txt aside)."""
    chart = helm_python.Chart.load(str(CHART))
    out = chart.render(values, name=release, namespace=namespace, is_install=True)
    return [
        doc
        for key, text in sorted(out.items())
        if not key.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def notes(values: dict) -> str:
    chart = helm_python.Chart.load(str(CHART))
    return next(
        t for k, t in chart.render(values, name="bookings", namespace="jobs").items() if k.endswith("NOTES.txt")
    )


def by_kind(docs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


def one(docs: list[dict], kind: str, suffix: str = "") -> dict:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    return found


def refusal(values: dict) -> str:
    with pytest.raises(helm_python.HelmValuesError) as info:
        render(values)
    return str(info.value)


@pytest.mark.parametrize("path", CI_VALUES, ids=[p.name for p in CI_VALUES])
def test_every_ci_values_file_lints_renders_and_validates(path):
    values = yaml.safe_load(path.read_text())
    for version in KUBE_VERSIONS:
        helm_python.lint(str(CHART), values, strict=True, kube_version=f"v{version}", namespace="jobs")
    docs = render(values)
    assert docs
    for doc in docs:
        kind = doc["kind"]
        if kind == "SparkApplication":
            errors = [
                f"{list(e.path)}: {e.message}"
                for e in jsonschema.Draft7Validator(CRD["openAPIV3Schema"]).iter_errors(doc)
            ]
            assert not errors, errors
            assert doc["apiVersion"] == f"{CRD['group']}/{CRD['version']}"
        elif kind == "ServiceMonitor":
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        else:
            for version in KUBE_VERSIONS:
                kubernetes_validate.validate(doc, version, strict=True)
        if kind == "ConfigMap" and "executor-template.yaml" in doc["data"]:
            template = yaml.safe_load(doc["data"]["executor-template.yaml"])
            for version in KUBE_VERSIONS:
                kubernetes_validate.validate(template, version, strict=True)
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"]), doc["metadata"]["name"]


def test_each_mode_renders_its_kinds():
    kinds = {name: sorted(by_kind(render(values_of(name)))) for name in ("local", "kubernetes", "operator")}
    assert kinds["local"] == ["ConfigMap", "Deployment", "PersistentVolumeClaim", "ServiceAccount"]
    assert kinds["kubernetes"] == [
        "ConfigMap",
        "Deployment",
        "PersistentVolumeClaim",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    assert kinds["operator"] == ["ConfigMap", "Role", "RoleBinding", "Service", "ServiceAccount", "SparkApplication"]


def test_kubernetes_mode_runs_the_driver_in_client_mode_owning_its_executors():
    docs = render(values_of("kubernetes"))
    pod = one(docs, "Deployment")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    args = container["args"]
    conf = dict(a.split("=", 1) for a in args[args.index("--deploy-mode") :] if "=" in a and a.startswith("spark."))
    assert container["command"] == ["spark-submit"] and args[:4] == [
        "--master",
        "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode",
        "client",
    ]
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"  # executors are owned by (and die with) it
    assert conf["spark.driver.host"] == "$(POD_IP)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert (conf["spark.driver.port"], conf["spark.blockManager.port"]) == ("7078", "7079")
    assert (conf["spark.executor.instances"], conf["spark.executor.cores"], conf["spark.executor.memory"]) == (
        "3",
        "1",
        "2g",
    )
    assert conf["spark.kubernetes.namespace"] == "jobs"
    service = one(docs, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert {p["port"] for p in service["spec"]["ports"]} == {7078, 7079, 9249}
    assert args[args.index("--METRIC_PROMETHEUS_PORT") + 1] == "9249"  # the job's own endpoint on the metrics port
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert args[-6:] == [
        "/opt/dagger/entry.py",
        "/etc/dagger/job.json",
        "--checkpoint-dir",
        "/var/lib/dagger/checkpoints/gen-1",
        "--METRIC_PROMETHEUS_PORT",
        "9249",
    ]
    template = yaml.safe_load(one(docs, "ConfigMap", "-spark")["data"]["executor-template.yaml"])
    assert conf["spark.kubernetes.executor.podTemplateFile"] == "/etc/dagger/spark/executor-template.yaml"
    mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
    claims = [v for v in template["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert mounts["checkpoint"] == "/var/lib/dagger/checkpoints" and claims  # executors write the checkpoint too
    assert one(docs, "PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadWriteMany"]


def test_the_driver_role_is_what_spark_needs_and_bound_to_the_jobs_account():
    docs = render(values_of("kubernetes"))
    (rule,) = one(docs, "Role")["rules"]
    assert rule["apiGroups"] == [""]
    assert sorted(rule["resources"]) == ["configmaps", "persistentvolumeclaims", "pods", "services"]
    assert sorted(rule["verbs"]) == sorted(
        ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    )
    binding = one(docs, "RoleBinding")
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    assert binding["roleRef"]["name"] == one(docs, "Role")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "jobs"}]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account
    local = render(values_of("local"))
    assert "Role" not in by_kind(local)
    assert one(local, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_operator_mode_submits_a_restarting_python_application():
    docs = render(values_of("operator"))
    app = one(docs, "SparkApplication")["spec"]
    assert (app["type"], app["mode"], app["mainApplicationFile"]) == (
        "Python",
        "cluster",
        "local:///opt/dagger/entry.py",
    )
    assert app["arguments"] == [
        "/etc/dagger/job.json",
        "--checkpoint-dir",
        "gs://my-bucket/checkpoints/bookings-to-bigquery/gen-1",
        "--METRIC_PROMETHEUS_PORT",
        "9249",
    ]
    assert app["restartPolicy"] == {
        "type": "Always",
        "onFailureRetryInterval": 10,
        "onSubmissionFailureRetryInterval": 20,
    }
    assert app["suspend"] is False and app["timeToLiveSeconds"] == 3600
    assert app["driver"]["serviceAccount"] == one(docs, "ServiceAccount")["metadata"]["name"]
    for role in ("driver", "executor"):
        env = {e["name"]: e.get("value") for e in app[role]["env"]}
        assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/secrets/google/credentials.json"
        mounts = {m["name"]: m["mountPath"] for m in app[role]["volumeMounts"]}
        assert mounts == {"job-config": "/etc/dagger/job.json", "gcp-credentials": "/var/secrets/google"}
    volumes = {v["name"]: v for v in app["volumes"]}
    assert volumes["gcp-credentials"]["secret"]["secretName"] == "bigquery-writer"
    assert app["driver"]["annotations"]["prometheus.io/port"] == "9249"
    assert app["driver"]["annotations"]["prometheus.io/path"] == "/metrics"


def test_suspended_means_no_driver_and_the_state_stays():
    local = render(values_of("suspended-local"))
    assert one(local, "Deployment")["spec"]["replicas"] == 0
    assert "PersistentVolumeClaim" in by_kind(local)
    assert one(render(values_of("local")), "Deployment")["spec"]["replicas"] == 1
    operator = render(values_of("suspended"))
    assert one(operator, "SparkApplication")["spec"]["suspend"] is True
    assert "SUSPENDED" in notes(values_of("suspended"))


def test_a_config_change_a_nonce_or_a_generation_restarts_the_job():
    def checksum(values: dict) -> tuple[str, str | None]:
        pod = one(render(values), "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return pod["checksum/config"], pod.get("dagger.raystack.io/restart-nonce")

    base = values_of("local")
    changed = values_of("local")
    changed["job"]["config"]["FLINK_SQL_QUERY"] = "SELECT order_number FROM data_stream_0"
    nonce = {**values_of("local"), "job": {**base["job"], "restartNonce": "1"}}
    generation = {**values_of("local"), "checkpoint": {"generation": 2}}
    sums = [checksum(v) for v in (base, changed, generation)]
    assert len({s[0] for s in sums}) == 3
    assert checksum(base) == checksum(values_of("local"))  # the same config renders the same checksum
    assert checksum(nonce) == (sums[0][0], "1")
    args = one(render(generation), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--checkpoint-dir") + 1] == "/var/lib/dagger/checkpoints/gen-2"


def test_the_rendered_job_json_is_the_given_config_and_loads():
    values = values_of("local")
    docs = render(values)
    rendered = json.loads(one(docs, "ConfigMap", "-config")["data"]["job.json"])
    assert rendered == values["job"]["config"]
    config = load_config(data=rendered)
    assert (
        config.FLINK_JOB_ID == "bookings-per-minute"
        and config.STREAMS[0].settings.SOURCE_KAFKA_TOPIC_NAMES == "bookings"
    )


def test_an_existing_config_map_is_mounted_under_its_key():
    docs = render(values_of("existing-configmap"))
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"] == ["bookings-dagger-spark"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "job-config")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "job-config")
    assert volume["configMap"]["name"] == "bookings-job"
    assert (mount["mountPath"], mount["subPath"]) == ("/etc/dagger/job.json", "bookings.json")
    checkpoint = next(v for v in pod["volumes"] if v["name"] == "checkpoint")
    assert checkpoint == {"name": "checkpoint", "emptyDir": {}}
    assert "lost when the pod goes" in notes(values_of("existing-configmap"))


def test_secrets_are_referenced_never_rendered():
    values = values_of("kubernetes")
    docs = render(values)
    assert "Secret" not in by_kind(docs)
    text = yaml.safe_dump_all(docs)
    assert "${KAFKA_PASSWORD}" in text  # the config references the variable; the value comes from the Secret
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "bookings-secrets"}}]
    for doc in docs:  # no env entry carries a literal secret-looking value
        for env in re.findall(r"(?im)^\s*-?\s*name: (\w*(?:PASSWORD|TOKEN|SECRET)\w*)\n\s*value:", yaml.safe_dump(doc)):
            pytest.fail(f"{doc['kind']} sets {env} literally")


def test_names_stay_within_63_characters_for_long_release_names():
    release = "a-release-name-that-is-quite-long-for-a-streaming-job-x"
    for name in MODES:
        for doc in render(values_of(name), release=release):
            assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"mode": "yarn"}, ["/mode", "'local', 'kubernetes', 'operator'"]),
        ({"job": {"config": {}}}, ["/job/config", "/job/existingConfigMap"]),
        ({"mode": "kubernetes"}, ["/checkpoint/persistence/accessModes", "must be 'ReadWriteMany'"]),
        ({"mode": "kubernetes", "checkpoint": {"persistence": {"enabled": False}}}, ["/checkpoint/location"]),
        ({"spark": {"executor": {"instances": "three"}}}, ["/spark/executor/instances", "want integer"]),
        ({"job": {"config": {"FLINK_JOB_ID": "x"}, "state": "paused"}}, ["/job/state", "'running', 'suspended'"]),
        ({"job": {"config": {"FLINK_JOB_ID": "x"}, "existingConfigMap": "cm"}}, ["/job/config", "maxProperties"]),
        ({"replicas": 2}, ["'replicas' not allowed"]),
    ],
    ids=[
        "unknown-mode",
        "no-config",
        "rwo-claim-in-kubernetes-mode",
        "no-shared-checkpoint",
        "wrong-type",
        "unknown-state",
        "config-and-existing-configmap",
        "unknown-key",
    ],
)
def test_the_schema_refuses_bad_values_naming_them(change, words):
    base = values_of("local")
    values = {**base, **change}
    if "job" in change:
        values["job"] = change["job"]
    message = refusal(values)
    assert all(word in message for word in words), message


def test_the_dashboard_ships_as_a_grafana_config_map_and_is_current():
    from scripts.grafana_dashboard import render as render_dashboard

    path = CHART / "dashboards" / "dagger.json"
    assert path.read_text() == render_dashboard(), "run `make docs` to regenerate the dashboard"
    docs = render(values_of("kubernetes"))
    config_map = one(docs, "ConfigMap", "-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["dagger-on-spark.json"]) == json.loads(path.read_text())
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert "ConfigMap" not in [
        d["kind"] for d in render(values_of("local")) if d["metadata"]["name"].endswith("-dashboard")
    ]


def test_the_values_reference_in_the_deploy_docs_is_current():
    from scripts.chart_reference import DOC, render_values_reference

    assert DOC == ROOT / "docs" / "deploy.md"
    assert "scripts/chart_reference.py docs/deploy.md" in (ROOT / "Makefile").read_text(), "make docs writes elsewhere"
    page = DOC.read_text()
    start, end = "<!-- helm-values:start -->", "<!-- helm-values:end -->"
    assert start in page and end in page, "docs/deploy.md has no generated values reference"
    current = page.split(start, 1)[1].split(end, 1)[0].strip()
    assert current == render_values_reference().strip(), "run `make docs` to regenerate the values reference"
