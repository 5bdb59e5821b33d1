"""PYTHON_UDF_CONFIG as Dagger takes it: UDF files from gs:// (a GCS-API server), PYTHON_ARCHIVES unpacked for the
UDFs, PYTHON_REQUIREMENTS installed from a local wheel (cached by content; an unreachable index is a clear config
error), and PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE as Spark's Arrow batch size."""

from __future__ import annotations

import base64
import hashlib
import zipfile

import pytest

from dagger.errors import DaggerConfigError
from testing.gcs_server import GcsServer

UDF_USING_EVERYTHING = '''
import tinypkg


def greet(name: str) -> str:
    """The archive's greeting and the installed package's suffix around ``name``."""
    with open("words/greeting.txt") as handle:  # unpacked from PYTHON_ARCHIVES (path#words)
        greeting = handle.read().strip()
    return f"{greeting} {name}{tinypkg.SUFFIX}"
'''


def make_wheel(directory, name: str = "tinypkg", version: str = "0.1") -> None:
    """A pure-Python wheel with ``{name}.SUFFIX = "!"``, written by hand (nothing to build, no index)."""
    files = {
        f"{name}/__init__.py": b'SUFFIX = "!"\n',
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    files[f"{name}-{version}.dist-info/RECORD"] = (
        "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    ).encode()
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)


def test_requirements_are_installed_once_per_content(tmp_path, monkeypatch, caplog):
    from dagger.python_udfs import install_requirements

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels)
    monkeypatch.setenv("DAGGER_CACHE_DIR", str(tmp_path / "cache"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"--no-index\n--find-links {wheels}\ntinypkg==0.1\n")
    first = install_requirements(requirements)
    assert (first / "tinypkg" / "__init__.py").read_text() == 'SUFFIX = "!"\n'
    with caplog.at_level("INFO", logger="dagger.python_udfs"):
        again = install_requirements(requirements)
    assert again == first
    assert any("already installed" in r.getMessage() for r in caplog.records)


def test_an_unreachable_index_is_a_config_error_naming_the_key(tmp_path, monkeypatch):
    from dagger.python_udfs import install_requirements

    monkeypatch.setenv("DAGGER_CACHE_DIR", str(tmp_path / "cache"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("--index-url http://127.0.0.1:1/simple\nsome-package-nobody-has==1.0\n")
    with pytest.raises(DaggerConfigError) as error:
        install_requirements(requirements)
    message = str(error.value)
    assert message.startswith("PYTHON_UDF_CONFIG.PYTHON_REQUIREMENTS: pip could not install requirements.txt: ")
    assert "some-package-nobody-has" in message and "is the package index reachable?" in message
    assert not list((tmp_path / "cache" / "requirements").glob("*/.complete"))  # nothing half-installed is kept


def test_a_missing_gcs_object_names_the_key_and_the_location(tmp_path, monkeypatch):
    from dagger.job import load_config
    from dagger.python_udfs import load_python_udfs
    from tests.unit.config.test_config import BASE

    with GcsServer("team-udfs") as gcs:
        for key, value in gcs.env.items():
            monkeypatch.setenv(key, value)
        config = load_config(
            data={
                **BASE,
                "PYTHON_UDF_ENABLE": True,
                "PYTHON_UDF_CONFIG": {"PYTHON_FILES": "gs://team-udfs/nothing/here.py"},
            }
        )
        with pytest.raises(
            DaggerConfigError,
            match=r"^PYTHON_UDF_CONFIG.PYTHON_FILES: cannot download gs://team-udfs/nothing/here.py: ",
        ):
            load_python_udfs(config)
