"""The C helper that moves Kafka records between librdkafka and Arrow buffers (``native.c``).

confluent-kafka makes one Python object per record on both sides: a ``Message`` per consumed record and a dict
per produced one (~1–1.5 µs each on a 2-core machine, as much as decoding them). The helper calls librdkafka's
batch APIs (``rd_kafka_consume_batch_queue``, ``rd_kafka_produce_batch``) and copies records straight from or
into Arrow binary arrays. :mod:`dagger.kafka.source.fetcher` reads with it and :mod:`dagger.kafka.producer`
produces with it.

The helper is compiled on first use with the system C compiler (``CC``, else ``cc``/``gcc``) against the
librdkafka that confluent-kafka bundles (so the two never disagree on the library version), and cached in
``DAGGER_NATIVE_CACHE`` (default ``~/.cache/dagger-on-spark``) under a name derived from the source and that
librdkafka. Where it cannot be built, or with ``DAGGER_KAFKA_NATIVE=0``, :func:`native_library` returns
``None`` (logging one warning) and callers use confluent-kafka: same records, slower. kafkarrow (a Rust Arrow
consumer on PyPI) was considered; it cannot start or stop at given offsets, which exactly-once ranges need.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dagger.cache import cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("native.c")

_LIBRARY: list[Any] = []  # [library or None] once resolved in this process


def native_library() -> Any | None:
    """The loaded helper, compiling it if needed; ``None`` (with one warning) when it cannot be had."""
    if not _LIBRARY:
        try:
            _LIBRARY.append(_load() if os.environ.get("DAGGER_KAFKA_NATIVE", "1") != "0" else None)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            log.warning("the columnar Kafka client is unavailable (%s); using confluent-kafka instead", exc)
            _LIBRARY.append(None)
    return _LIBRARY[0]


def kafka_exception_text(exc: Exception) -> str:
    """librdkafka's own message for a confluent-kafka ``KafkaException`` (its first argument is a KafkaError)."""
    return str(exc.args[0] if exc.args else exc)


def config_arrays(config: dict[str, Any]) -> tuple[Any, Any, int]:
    """librdkafka settings as the two ``char *`` arrays and the count the helper's ``*_open`` calls take."""
    keys = [str(k).encode() for k in config]
    values = [(str(v).lower() if isinstance(v, bool) else str(v)).encode() for v in config.values()]
    return (ctypes.c_char_p * len(keys))(*keys), (ctypes.c_char_p * len(values))(*values), len(keys)


def _librdkafka() -> str:
    import confluent_kafka

    package = Path(confluent_kafka.__file__).resolve().parent
    found = sorted(glob.glob(str(package.parent / "confluent_kafka.libs" / "librdkafka*.so*")))
    if found:
        return found[0]

    system = ctypes.util.find_library("rdkafka")
    if system is None:
        raise RuntimeError("no librdkafka found next to confluent_kafka or on the system")
    return system


def _load() -> Any:
    rdkafka = _librdkafka()
    ctypes.CDLL(rdkafka, mode=ctypes.RTLD_GLOBAL)  # the helper's librdkafka symbols resolve to this copy
    digest = hashlib.sha256(SOURCE.read_bytes() + rdkafka.encode()).hexdigest()[:16]
    target = cache_dir() / f"arrow_kafka-{digest}.so"
    if not target.exists():
        _compile(target)
    library = ctypes.CDLL(str(target))
    _declare(library)
    return library


def _declare(library: Any) -> None:
    p, i64, i32, text, size = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t
    strings = ctypes.POINTER(ctypes.c_char_p)
    signatures = {
        # reading
        "dk_open": (p, [strings, strings, ctypes.c_int, text, i32, i64, text, size]),
        "dk_consume": (i64, [p, i64, ctypes.c_int, i64, p, p, p]),
        "dk_fill": (None, [p] * 8),
        "dk_error": (text, [p]),
        "dk_close": (None, [p]),
        # producing
        "dk_producer_open": (p, [strings, strings, ctypes.c_int, text, text, size]),
        "dk_produce": (ctypes.c_int, [p, i32, i64, p, p, p, p, p]),
        "dk_producer_flush": (ctypes.c_int, [p, ctypes.c_int]),
        "dk_producer_take_failed": (i64, [p]),
        "dk_producer_error": (text, [p]),
        "dk_producer_close": (None, [p, ctypes.c_int]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(library, name)
        function.restype = result
        function.argtypes = arguments


def _compile(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build the columnar Kafka client; install gcc")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        command = [compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()[:500]}")
        os.replace(built, target)  # atomic: concurrent workers never load a half-written file
