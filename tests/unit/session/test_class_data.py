"""The driver JVM's class-data archive: written once at a session's exit, mapped by the next sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader

from dagger.session import class_data as jvm_classes


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGGER_NATIVE_CACHE", str(tmp_path))
    monkeypatch.delenv(jvm_classes.MODE_ENV, raising=False)
    monkeypatch.setattr(jvm_classes, "_PENDING", [])
    return tmp_path


def test_without_an_archive_the_jvm_writes_one_at_exit_and_later_ones_map_it(cache, monkeypatch):
    archive = jvm_classes.archive_path()
    assert archive is not None and archive.parent == cache
    options = jvm_classes.java_options()
    assert options.startswith(f"-XX:ArchiveClassesAtExit={archive}.") and ".partial " in options
    assert jvm_classes.QUIET in options
    archive.write_bytes(b"archived")
    assert jvm_classes.java_options() == f"-XX:SharedArchiveFile={archive} {jvm_classes.QUIET}"
    monkeypatch.setenv(jvm_classes.MODE_ENV, "0")
    assert jvm_classes.java_options() == ""


def test_read_only_mode_maps_an_archive_but_never_writes_one(cache, monkeypatch):
    monkeypatch.setenv(jvm_classes.MODE_ENV, "read")
    assert jvm_classes.java_options() == ""
    assert jvm_classes._PENDING == []
    archive = jvm_classes.archive_path()
    archive.write_bytes(b"archived")
    assert jvm_classes.java_options().startswith(f"-XX:SharedArchiveFile={archive} ")


def test_another_class_path_is_another_archive(cache, tmp_path):
    jar = tmp_path / "udfs.jar"
    jar.write_bytes(b"PK")
    assert jvm_classes.archive_path(str(jar)) != jvm_classes.archive_path()


def _writer(partial: Path, code: int) -> subprocess.Popen:
    """A process that, like the JVM, writes ``partial`` once its stdin closes, then exits with ``code``."""
    script = f"import sys; sys.stdin.read(); open({str(partial)!r}, 'wb').write(b'classes'); sys.exit({code})"
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)


def test_finish_renames_the_archive_after_a_clean_exit_only(cache):
    archive = cache / "spark-classes-x.jsa"
    partial = cache / "spark-classes-x.jsa.1.partial"
    assert not jvm_classes.finish(_writer(partial, 1), partial, archive)
    assert not partial.exists() and not archive.exists()  # a failed JVM leaves nothing to map
    assert jvm_classes.finish(_writer(partial, 0), partial, archive)
    assert archive.read_bytes() == b"classes" and not partial.exists()


def test_finishing_another_jvm_leaves_the_running_session_working(cache, spark):
    # finish() waits for the JVM it is given; the session's own accumulator server is left to the driver's exit
    archive, partial = cache / "s.jsa", cache / "s.jsa.1.partial"
    assert jvm_classes.finish(_writer(partial, 0), partial, archive)
    spark.dataSource.register(_Three)  # a Python data source's planning reports to the accumulator server
    assert [r.n for r in spark.read.format("three").load().collect()] == [0, 1, 2]


class _Three(DataSource):
    @classmethod
    def name(cls) -> str:
        return "three"

    def schema(self) -> str:
        return "n int"

    def reader(self, schema) -> DataSourceReader:
        return _ThreeReader()


class _ThreeReader(DataSourceReader):
    def read(self, partition):
        yield from ((n,) for n in range(3))


def test_finish_gives_up_on_a_jvm_that_does_not_exit(cache):
    archive, partial = cache / "a.jsa", cache / "a.jsa.1.partial"
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE)
    assert not jvm_classes.finish(stuck, partial, archive, timeout=0.5)
    assert stuck.poll() is not None and not archive.exists()


def test_stale_partial_archives_are_removed(cache):
    archive = jvm_classes.archive_path()
    stale, fresh = (archive.with_name(f"{archive.name}.{n}.partial") for n in (1, 2))
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0, 0))
    jvm_classes.java_options()
    assert not stale.exists() and fresh.exists()  # another process may still be writing the fresh one


SESSION = textwrap.dedent(
    """
    import json, sys
    from dagger.config.model import JobConfig
    from dagger.session.spark import get_session
    spark = get_session(JobConfig.model_construct(SPARK_MASTER="local[1]"))
    assert spark.range(3).count() == 3
    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    print(json.dumps([a for a in args if "Archive" in a]))
    """
)


def _session(env: dict) -> list[str]:
    import json

    done = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_real_session_writes_the_archive_and_the_next_one_maps_it(tmp_path):
    env = dict(os.environ, DAGGER_NATIVE_CACHE=str(tmp_path))
    env.pop(jvm_classes.MODE_ENV, None)
    first = _session(env)
    assert len(first) == 1 and first[0].startswith("-XX:ArchiveClassesAtExit=")
    archives = list(tmp_path.glob("spark-classes-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10 * 2**20, list(tmp_path.iterdir())
    assert not list(tmp_path.glob("*.partial"))
    assert _session(env) == [f"-XX:SharedArchiveFile={archives[0]}"]
