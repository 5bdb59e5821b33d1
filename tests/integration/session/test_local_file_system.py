"""Hadoop's local file system of our local sessions (``dagger/jvm/LocalFileSystem.java``): the modes Hadoop's own
sets, through a system call instead of a ``chmod`` process, and the checksums beside each file."""

from __future__ import annotations

import os
import stat

from dagger.session.spark import LOCAL_FILE_SYSTEM


def _fs(spark, folder):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"file://{folder}")
    return jvm, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def test_the_sessions_local_files_go_through_ours_with_hadoops_modes_and_checksums(spark, tmp_path):
    assert spark.conf.get("spark.hadoop.fs.file.impl") == LOCAL_FILE_SYSTEM["spark.hadoop.fs.file.impl"]
    jvm, fs = _fs(spark, tmp_path)
    assert fs.getClass().getName() == "dagger.hadoop.LocalFileSystem"
    Path, FsPermission = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.permission.FsPermission
    out = fs.create(Path(f"file://{tmp_path}/offsets/0"), True)  # as a checkpoint's offset log writes
    out.write(b"v1\n")
    out.close()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "offsets" / "0").st_mode) == 0o666 & ~umask & ~0o022  # Hadoop's 022
    assert (tmp_path / "offsets" / ".0.crc").exists()
    stream = fs.open(Path(f"file://{tmp_path}/offsets/0"))
    assert stream.read() == ord("v")  # read back through the checksummed stream
    stream.close()

    fs.setPermission(Path(f"file://{tmp_path}/offsets/0"), FsPermission.createImmutable(0o640))
    assert stat.S_IMODE(os.stat(tmp_path / "offsets" / "0").st_mode) == 0o640
    sticky = tmp_path / "shared"
    sticky.mkdir()
    fs.setPermission(Path(f"file://{sticky}"), FsPermission.createImmutable(0o1777))  # Hadoop's own way: chmod
    assert stat.S_IMODE(os.stat(sticky).st_mode) == 0o1777
