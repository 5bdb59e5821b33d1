"""JVM libraries: Spark's own connectors for the installed pyspark from Maven Central, Dagger's own JVM classes,
and where they are cached.

``make install`` runs ``python -m dagger.session.jars fetch``: Maven (``mvn``) resolves each set of coordinates with its
dependencies and copies the jars into ``<DAGGER_NATIVE_CACHE>/jars/<set>/`` (default
``~/.cache/dagger-on-spark/jars``), leaving out every jar whose artifact the pyspark package already ships (its
``jars/`` directory holds Spark, Scala, Hadoop's client and the compression codecs: two versions of one library
on a classpath is a bug waiting to happen). ``dagger run`` in local mode puts the cached connector jars on the
driver's classpath (``spark.jars``); without a cache it names them as ``spark.jars.packages``, which Spark
resolves from Maven Central on first use. On clusters, the same coordinates are ``spark-submit --packages``
(:func:`spark_packages`).

Dagger's own JVM classes (``dagger/jvm/*.java``: Longbow's history on the state store) are compiled by the same
``fetch`` with the JDK's ``javac`` against the installed pyspark's jars, into ``dagger-jvm-<hash>.jar`` beside the
connectors, so they travel with them (the image's ``/opt/dagger/jars``); ``python -m dagger.session.jars helper``
prints its path for ``spark-submit --jars``.

Runs on the driver (and in ``make install``), never on executors.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dagger.cache import cache_dir

#: Spark's Kafka connector (it brings kafka-clients, the token provider and commons-pool2) and spark-avro, at the
#: installed Spark's version; and protobuf-java, whose descriptors Dagger's own protobuf codec in the JVM
#: (``dagger/jvm/Proto*.java``) is built from. spark-protobuf is not served by Maven Central at any version
#: (checked 2026-11-28: 3.5.0, 4.1.1 and 4.2.0 answer 404), so Dagger reads and writes the wire format itself.
SPARK_CONNECTORS = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:{spark}",
    "org.apache.spark:spark-avro_2.13:{spark}",
    "com.google.protobuf:protobuf-java:4.36.2",
)

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dagger-on-spark</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{0}</groupId><artifactId>{1}</artifactId><version>{2}</version></dependency>"


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def spark_packages() -> list[str]:
    """The connectors' Maven coordinates for the installed Spark (``--packages`` / ``spark.jars.packages``)."""
    return [c.format(spark=spark_version()) for c in SPARK_CONNECTORS]


def cache_root() -> Path:
    return cache_dir() / "jars"


def spark_jars_dir() -> Path:
    return cache_root() / f"spark-{spark_version()}"


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``: the name without its version."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar)


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def connector_jars() -> list[str] | None:
    """The connector jars: ``DAGGER_JARS`` (a directory, the image's ``/opt/dagger/jars``), else the cache for
    the installed Spark; None when neither holds them (``make install`` fetches them)."""
    given = os.environ.get("DAGGER_JARS")
    if given and Path(given, ".complete").exists():
        return sorted(str(j) for j in Path(given).glob("*.jar"))
    folder = spark_jars_dir()
    if not (folder / ".complete").exists() or (folder / ".complete").read_text().split() != spark_packages():
        return None
    return sorted(str(j) for j in folder.glob("*.jar"))


def fetch(coordinates: list[str], target: Path, skip_artifacts: set[str] = frozenset()) -> list[Path]:
    """Resolve ``coordinates`` (``group:artifact:version``) with their runtime dependencies through Maven into
    ``target``; jars whose artifact is in ``skip_artifacts`` are left out. Idempotent: a complete folder of the
    same coordinates is kept (a folder fetched for other coordinates is fetched again)."""
    done = target / ".complete"
    if done.exists() and done.read_text().split() == list(coordinates):
        return sorted(target.glob("*.jar"))
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven (mvn) is needed to fetch jars from Maven Central: apt-get install maven")
    dependencies = "\n".join(_DEPENDENCY.format(*c.split(":")) for c in coordinates)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=target.parent))
    try:
        pom = staging / "pom.xml"
        pom.write_text(_POM.format(name=target.name, dependencies=dependencies))
        result = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={staging / 'jars'}"],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"mvn could not fetch {', '.join(coordinates)}:\n{result.stdout[-3000:]}")
        for jar in (staging / "jars").glob("*.jar"):
            if _artifact(jar.name) in skip_artifacts:
                jar.unlink()
        (staging / "jars" / ".complete").write_text("\n".join(coordinates) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging / "jars", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sorted(target.glob("*.jar"))


def helper_sources() -> list[Path]:
    return sorted((Path(__file__).resolve().parents[1] / "jvm").glob("*.java"))


def helper_name() -> str:
    """The helper jar's file name: the hash of its sources and of the Spark they are compiled against."""
    digest = hashlib.sha256(spark_version().encode())
    for source in helper_sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return f"dagger-jvm-{digest.hexdigest()[:12]}.jar"


def build_helper(target: Path) -> Path:
    """Compile ``dagger/jvm/*.java`` into ``target/<helper_name()>`` (kept when it exists; older builds removed)."""

    jar = target / helper_name()
    if jar.exists():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError(
            "a JDK (javac) compiles Dagger's JVM classes (dagger/jvm): apt-get install openjdk-17-jdk-headless"
        )
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dagger-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        result = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", os.pathsep.join([str(pyspark_jars() / "*"), str(target / "*")]),
             "-d", str(classes),
             *map(str, helper_sources())],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"javac could not compile dagger/jvm:\n{result.stdout}{result.stderr}")
        staged = Path(tmp) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        for old in target.glob("dagger-jvm-*.jar"):
            old.unlink()
        shutil.move(staged, jar)
    return jar


def fetch_spark_connectors() -> list[Path]:
    shipped = {_artifact(j.name) for j in pyspark_jars().glob("*.jar")}
    return fetch(spark_packages(), spark_jars_dir(), shipped)


def session_settings() -> dict[str, str]:
    """What a local session needs for the connectors: the cached jars on the driver's class path (in local mode
    the executors are the driver's JVM), else their coordinates for Spark to resolve from Maven Central."""
    jars = connector_jars()
    if jars is not None:
        return {"spark.driver.extraClassPath": os.pathsep.join(jars)}
    return {"spark.jars.packages": ",".join(spark_packages())}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["fetch"]:
        for jar in fetch_spark_connectors():
            print(jar)
        print(build_helper(spark_jars_dir()))
        return 0
    if args[:1] == ["helper"]:
        folder = Path(os.environ["DAGGER_JARS"]) if os.environ.get("DAGGER_JARS") else spark_jars_dir()
        print(folder / helper_name())
        return 0
    if args[:1] == ["packages"]:
        print(",".join(spark_packages()))
        return 0
    print("usage: python -m dagger.session.jars fetch | packages | helper", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
