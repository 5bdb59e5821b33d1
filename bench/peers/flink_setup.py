"""The JVM side of the Flink peer (``bench/peers/flink_job.py``): the Kafka connector and the protobuf format from
Maven Central, and the bench's protobuf messages compiled to Java classes, in one folder of jars.

``python bench/peers/flink_setup.py`` (``make .venv-flink/.installed``) fills ``<DAGGER_NATIVE_CACHE>/flink-<FLINK>/``
(default ``~/.cache/dagger-on-spark/flink-2.2.1/``) and prints its path:

* ``flink-sql-connector-kafka`` and ``flink-protobuf`` with their runtime dependencies (``protobuf-java``), resolved
  by ``mvn dependency:copy-dependencies`` from a generated pom (:func:`dagger.session.jars.fetch`);
* ``booking-proto-<hash>.jar``: ``descriptors/booking.proto`` through ``protoc --java_out`` (protoc from Maven
  Central's ``com.google.protobuf:protoc`` executable, at the version of the ``protobuf-java`` the format depends
  on), ``javac`` against that ``protobuf-java``, then ``jar``. The repo's proto names no Java options; a copy of it
  gets ``java_multiple_files``, so each message is the class of its full name (``dagger.examples.BookingLogMessage``,
  what ``protobuf.message-class-name`` takes).

Versions: PyFlink 2.2.1, whose Kafka connector is ``5.0.0-2.2`` (Maven Central has none built for Flink 2.3), and
``flink-protobuf`` 2.2.0 (no 2.2.1 is published; ``flink-sql-protobuf``, the shaded jar, has no 2.2.x either):
the format is the plain jar plus ``protobuf-java`` 4.32.1, its compile dependency, so the generated classes are
compiled by protoc 32.1 (``protoc`` 4.32.1 on Maven Central) against the same runtime.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from dagger.cache import cache_dir  # noqa: E402 - stdlib only, like dagger.session.jars
from dagger.session.jars import fetch  # noqa: E402

FLINK = "2.2.1"  #: PyFlink (``apache-flink`` on PyPI), pinned in the Makefile too
PROTOBUF_JAVA = "4.32.1"  #: flink-protobuf 2.2.0's compile dependency; protoc 4.32.1 is protoc 32.1
JARS = (
    "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2",  # kafka-clients 4.2.0 inside, relocated
    "org.apache.flink:flink-protobuf:2.2.0",
    f"com.google.protobuf:protobuf-java:{PROTOBUF_JAVA}",
)
PROTO = ROOT / "descriptors" / "booking.proto"
JAVA_OPTIONS = 'option java_multiple_files = true;\noption java_package = "dagger.examples";\n'


def jars_dir() -> Path:
    """Where the Flink peer's jars are cached (the folder ``flink_job.py`` reads by default)."""
    return cache_dir() / f"flink-{FLINK}"


def _protoc(work: Path) -> Path:
    """Maven Central's protoc executable for this machine, at :data:`PROTOBUF_JAVA`'s version."""
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch_64", "arm64": "aarch_64"}[platform.machine()]
    artifact = f"com.google.protobuf:protoc:{PROTOBUF_JAVA}:exe:linux-{arch}"
    command = ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={work}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"mvn could not fetch {artifact}:\n{result.stdout[-3000:]}")
    exe = next(work.glob("protoc-*.exe"))
    exe.chmod(0o755)
    return exe


def build_proto_jar(target: Path) -> Path:
    """``booking.proto``'s messages as Java classes in ``target/booking-proto-<hash>.jar`` (kept while the proto
    is unchanged; older builds are removed)."""
    digest = hashlib.sha256(PROTO.read_bytes() + JAVA_OPTIONS.encode() + PROTOBUF_JAVA.encode()).hexdigest()[:12]
    jar = target / f"booking-proto-{digest}.jar"
    if jar.exists():
        return jar
    runtime = next(target.glob(f"protobuf-java-{PROTOBUF_JAVA}.jar"))
    with tempfile.TemporaryDirectory(prefix="flink-proto-") as tmp:
        work = Path(tmp)
        protos, java, classes = work / "proto", work / "java", work / "classes"
        for d in (protos, java, classes):
            d.mkdir()
        with zipfile.ZipFile(runtime) as z:  # the well-known types (timestamp.proto) ship in protobuf-java
            z.extractall(protos, [n for n in z.namelist() if n.startswith("google/protobuf/") and n.endswith(".proto")])
        text, found = re.subn(r"^(package [\w.]+;)$", r"\1\n" + JAVA_OPTIONS, PROTO.read_text(), count=1, flags=re.M)
        if not found:
            raise RuntimeError(f"no package statement in {PROTO}")
        (protos / PROTO.name).write_text(text)
        subprocess.run([_protoc(work), f"-I{protos}", f"--java_out={java}", str(protos / PROTO.name)], check=True)
        sources = [str(p) for p in java.rglob("*.java")]
        subprocess.run(["javac", "-nowarn", "--release", "11", "-cp", str(runtime), "-d", str(classes), *sources],
                       check=True)  # fmt: skip
        staged = target / f".{jar.name}"
        subprocess.run(["jar", "cf", str(staged), "-C", str(classes), "."], check=True)
        for old in target.glob("booking-proto-*.jar"):
            old.unlink()
        staged.rename(jar)
    return jar


def main() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:  # run by the Flink venv's python: its PyFlink must be the one these jars go with
        if version("apache-flink") != FLINK:
            sys.exit(f"apache-flink {version('apache-flink')} is installed; these jars go with {FLINK}")
    except PackageNotFoundError:
        pass
    for tool in ("mvn", "javac", "jar"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed: apt-get install maven openjdk-17-jdk-headless")
    target = jars_dir()
    fetch(list(JARS), target)
    build_proto_jar(target)
    print(target)


if __name__ == "__main__":
    main()
