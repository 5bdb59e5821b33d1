"""The image's entrypoint roles for Spark on Kubernetes: ``dagger driver …`` and ``dagger executor``.

Spark's Kubernetes scheduler starts executor pods (and, in cluster mode, the driver pod the Spark operator
submits) from the job's image with the container arguments ``executor`` or ``driver …`` and the settings in
environment variables (``SPARK_DRIVER_URL``, ``SPARK_EXECUTOR_ID`` …), expecting the image's entrypoint to start
the right process. The image's entrypoint is ``dagger``, so these two words are commands of it (hidden from
``--help``): ``executor`` starts Spark's executor backend in this JVM, ``driver`` runs ``spark-submit`` in client
mode on the driver pod. Any other arguments are the ``dagger`` CLI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ROLES = ("driver", "executor")
_EXECUTOR_ENV = (
    "SPARK_DRIVER_URL",
    "SPARK_EXECUTOR_ID",
    "SPARK_EXECUTOR_CORES",
    "SPARK_APPLICATION_ID",
    "SPARK_EXECUTOR_POD_IP",
    "SPARK_RESOURCE_PROFILE_ID",
    "SPARK_EXECUTOR_POD_NAME",
)


def spark_home(environ: Mapping[str, str]) -> Path:
    """``SPARK_HOME``, else the installed pyspark package (which carries Spark's jars and scripts)."""
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def _classpath(environ: Mapping[str, str], home: Path) -> str:
    parts = [environ.get("SPARK_CONF_DIR") or str(home / "conf"), str(home / "jars" / "*")]
    if environ.get("HADOOP_CONF_DIR"):
        parts.insert(0, environ["HADOOP_CONF_DIR"])
    for key in ("SPARK_CLASSPATH", "SPARK_EXTRA_CLASSPATH", "SPARK_DIST_CLASSPATH"):
        if environ.get(key):
            parts.append(environ[key])
    return ":".join(parts)


def role_command(argv: list[str], environ: Mapping[str, str]) -> list[str]:
    """The process a Spark-on-Kubernetes pod of role ``argv[0]`` runs (``argv[1:]`` are the driver's arguments)."""
    role, rest = argv[0], argv[1:]
    home = spark_home(environ)
    if role == "driver":
        return [
            str(home / "bin" / "spark-submit"),
            "--conf",
            f"spark.driver.bindAddress={environ.get('SPARK_DRIVER_BIND_ADDRESS', '0.0.0.0')}",
            "--deploy-mode",
            "client",
            *rest,
        ]
    if role == "executor":
        missing = [key for key in _EXECUTOR_ENV if not environ.get(key)]
        if missing:
            raise SystemExit(
                f"dagger executor: {', '.join(missing)} not set; this command is started by Spark's Kubernetes "
                "scheduler in executor pods, not by hand"
            )
        # Spark passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, ... in order
        options = [
            environ[key]
            for key in sorted(
                (k for k in environ if k.startswith("SPARK_JAVA_OPT_")), key=lambda k: int(k.rsplit("_", 1)[1])
            )
        ]
        java = str(Path(environ["JAVA_HOME"]) / "bin" / "java") if environ.get("JAVA_HOME") else "java"
        memory = environ.get("SPARK_EXECUTOR_MEMORY")
        return [
            java,
            *options,
            *([f"-Xms{memory}", f"-Xmx{memory}"] if memory else []),
            "-cp",
            _classpath(environ, home),
            "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
            "--driver-url",
            environ["SPARK_DRIVER_URL"],
            "--executor-id",
            environ["SPARK_EXECUTOR_ID"],
            "--cores",
            environ["SPARK_EXECUTOR_CORES"],
            "--app-id",
            environ["SPARK_APPLICATION_ID"],
            "--hostname",
            environ["SPARK_EXECUTOR_POD_IP"],
            "--resourceProfileId",
            environ["SPARK_RESOURCE_PROFILE_ID"],
            "--podName",
            environ["SPARK_EXECUTOR_POD_NAME"],
        ]
    raise ValueError(f"unknown role {role!r}; accepted: {', '.join(ROLES)}")


def exec_role(argv: list[str]) -> None:
    """Replace this process with the pod role's process (never returns)."""
    command = role_command(argv, os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(command[0], command)
