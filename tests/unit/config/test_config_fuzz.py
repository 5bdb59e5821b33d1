"""Broken configs, generated from the config model: each ends in exit 2 with one message naming the key, and never
a traceback (issue 26, item 4). `dagger validate` runs in-process: config errors stop it before Spark starts."""

from __future__ import annotations

import json
import random
import typing
from pathlib import Path

import pytest

from dagger.cli import main
from dagger.config.model import JobConfig, StreamConfig
from dagger.job.binding import FORMATS, SOURCES
from tests.unit.config.test_config import BASE, STREAM

_STRICT_TYPES = (int, bool, float)


def _typo(key: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(key) - 1)
    return key[:i] + key[i + 1] + key[i] + key[i + 2 :] if key[i] != key[i + 1] else key[:i] + key[i + 1 :]


def _bad_values(field: typing.Any) -> list[typing.Any]:
    """Values the field cannot take, from its annotation and constraints."""
    annotation = field.annotation
    args = typing.get_args(annotation)
    kinds = {a for a in (annotation, *args) if a is not type(None)}
    out: list[typing.Any] = []
    if bool in kinds:
        out += ["maybe", [True]]
    elif int in kinds:
        out += ["ten", 1.5, {"a": 1}]
        if any(getattr(m, "gt", None) is not None or getattr(m, "ge", None) is not None for m in field.metadata):
            out.append(-7)
    elif typing.get_origin(annotation) is typing.Literal:
        out += ["no-such-choice", 3]
    return out


def _cases() -> list[tuple[str, dict, str]]:
    """(case id, config, the key its message must name)."""
    rng = random.Random(26)
    cases: list[tuple[str, dict, str]] = []
    for name, field in JobConfig.model_fields.items():
        if name.startswith("single_sink") or name in BASE:
            continue
        alias = field.alias or name
        if not alias.isupper():
            continue
        for i, value in enumerate(_bad_values(field)):
            cases.append((f"{alias}-bad{i}", {**BASE, alias: value}, alias))
        typo = _typo(alias, rng)
        if typo not in JobConfig.model_fields:
            cases.append((f"{alias}-typo", {**BASE, typo: "1"}, typo))
    # a Kafka stream of protobuf records: the stream's own keys, its source's and its input data type's
    stream_fields = {
        **StreamConfig.model_fields,
        **SOURCES.plugins()["KAFKA_CONSUMER"].settings.model_fields,
        **FORMATS.plugins()["PROTO"].settings.model_fields,
    }
    known = {*stream_fields, *SOURCES.keys(), *FORMATS.keys()}
    for name, field in stream_fields.items():
        alias = field.alias or name
        for i, value in enumerate(_bad_values(field)):
            cases.append((f"STREAMS.{alias}-bad{i}", {**BASE, "STREAMS": [{**STREAM, alias: value}]}, alias))
        typo = _typo(alias, rng)
        if typo not in known:
            cases.append((f"STREAMS.{alias}-typo", {**BASE, "STREAMS": [{**STREAM, typo: "x"}]}, typo))
    for key in ("FLINK_SQL_QUERY", "STREAMS"):
        cases.append((f"{key}-missing", {k: v for k, v in BASE.items() if k != key}, key))
    for i, streams in enumerate(["[{", 5, [], ["x"], [{}], {"a": 1}]):
        cases.append((f"STREAMS-shape{i}", {**BASE, "STREAMS": streams}, "STREAMS"))
    for key in ("INPUT_SCHEMA_TABLE", "SOURCE_DETAILS"):
        broken = [{k: v for k, v in STREAM.items() if k != key}]
        if key in STREAM:
            cases.append((f"STREAMS.{key}-missing", {**BASE, "STREAMS": broken}, key))
    for i, (sinks, message) in enumerate(
        [
            ("[{", "SINKS: is not valid JSON"),
            (
                [{"SINK_TYPE": "nope"}],
                "SINKS[0].SINK_TYPE: 'nope' is not accepted; accepted: bigquery, influx, kafka, log",
            ),
            ([{"SINK_TYPE": "kafka"}], "SINKS[0]: SINK_KAFKA_BROKERS is required when SINK_TYPE is 'kafka'"),
            ([{"SINK_TYPE": "log", "X": 1}], "SINKS[0].X: unknown key"),
        ]
    ):
        cases.append((f"SINKS-shape{i}", {**BASE, "SINKS": sinks}, message))  # where, what, and what is accepted
    return cases


CASES = _cases()


def test_the_generator_covers_a_few_hundred_configs():
    assert len(CASES) >= 200


@pytest.mark.parametrize(("config", "key"), [(c, k) for _, c, k in CASES], ids=[i for i, _, _ in CASES])
def test_a_broken_config_exits_2_with_one_message_naming_the_key(config, key, tmp_path, capsys):
    path = Path(tmp_path) / "job.json"
    path.write_text(json.dumps(config))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    messages = [line for line in err.splitlines() if line.startswith("dagger: ")]
    assert len(messages) == 1, err  # one message (its problems follow, one per line)
    assert key in err, err
