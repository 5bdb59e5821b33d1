"""The image's entrypoint roles: what Spark's Kubernetes scheduler starts in executor and driver pods."""

from __future__ import annotations

import pytest

from dagger.container import role_command

EXECUTOR_ENV = {
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "SPARK_HOME": "/opt/spark",
    "SPARK_CONF_DIR": "/etc/dagger/spark",
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "2g",
    "SPARK_APPLICATION_ID": "spark-app-1",
    "SPARK_EXECUTOR_POD_IP": "10.0.0.9",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "job-exec-3",
    "SPARK_JAVA_OPT_10": "-Dlast",
    "SPARK_JAVA_OPT_0": "-Dfirst",
    "SPARK_JAVA_OPT_2": "-Dsecond",
}


def test_an_executor_pod_starts_sparks_executor_backend_with_its_options_in_order():
    command = role_command(["executor"], EXECUTOR_ENV)
    assert command[:6] == ["/usr/lib/jvm/java-17/bin/java", "-Dfirst", "-Dsecond", "-Dlast", "-Xms2g", "-Xmx2g"]
    assert command[6:8] == ["-cp", "/etc/dagger/spark:/opt/spark/jars/*"]
    assert command[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(command[9::2], command[10::2], strict=True))
    assert flags == {
        "--driver-url": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
        "--executor-id": "3",
        "--cores": "2",
        "--app-id": "spark-app-1",
        "--hostname": "10.0.0.9",
        "--resourceProfileId": "0",
        "--podName": "job-exec-3",
    }


def test_an_executor_started_by_hand_names_what_is_missing():
    with pytest.raises(SystemExit, match="SPARK_DRIVER_URL, SPARK_EXECUTOR_ID.* not set; this command is started by"):
        role_command(["executor"], {"SPARK_HOME": "/opt/spark"})


def test_a_driver_pod_runs_spark_submit_in_client_mode_with_its_arguments():
    command = role_command(
        ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "local:///opt/dagger/entry.py", "job"],
        {"SPARK_HOME": "/opt/spark", "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"},
    )
    assert command == [
        "/opt/spark/bin/spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.0.0.5",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "local:///opt/dagger/entry.py",
        "job",
    ]


def test_without_spark_home_the_installed_pyspark_is_spark():
    import pyspark

    command = role_command(["driver"], {})
    assert command[0].startswith(pyspark.__file__.rsplit("/", 1)[0]) and command[0].endswith("bin/spark-submit")
