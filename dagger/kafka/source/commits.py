"""Committing a Kafka stream's processed offsets to its consumer group, so ``kafka-consumer-groups`` and lag
exporters see the job. A commit goes through the admin API (``AlterConsumerGroupOffsets``), whose answer can be
waited for within a bound, because a consumer's own commit waits for the group's coordinator without end while the
brokers are unreachable (docs/investigations/commit_while_unreachable.md). The bound is kept here, not by
librdkafka's request timeout: an admin request whose own timeout fires while the brokers are cut can abort the
process (docs/investigations/admin_request_timeout_abort.md). Runs on the driver.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from dagger.kafka.source.spec import (
    STREAM_KEY,
    positions,
    split_offset_key,
)
from dagger.librdkafka_logs import quiet

log = logging.getLogger(__name__)

#: the longest a commit of offsets to a consumer group may take; a failed or late commit is logged, never fatal
#: (the checkpoint holds the position; the next commit carries the group forward)
COMMIT_TIMEOUT_SECONDS = 10.0
#: the request timeout a commit gives librdkafka: its longest (one hour), so that its timer does not fire while the
#: brokers are cut, which can abort the process (docs/investigations/admin_request_timeout_abort.md); the wait is
#: bounded by ``commit_within`` instead, and the caller drops a client whose answer was late
_REQUEST_TIMEOUT_SECONDS = 3600
#: librdkafka's consumer-only settings, left out of the admin client that commits (it would warn about each)
_CONSUMER_ONLY = re.compile(
    r"group\..*|auto\.offset\.reset|enable\.auto\..*|auto\.commit\..*|enable\.partition\.eof|isolation\.level"
    r"|max\.partition\.fetch\.bytes|fetch\..*|queued\..*|session\.timeout\.ms|heartbeat\.interval\.ms"
    r"|partition\.assignment\.strategy|coordinator\.query\.interval\.ms|max\.poll\.interval\.ms|check\.crcs"
    r"|consume\.callback\.max\.messages|offset\.store\..*|allow\.auto\.create\.topics"
)


def group_client(client_config: dict[str, str]) -> Any:
    """An admin client on the brokers and with the security settings of ``client_config`` (a consumer's)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(quiet({k: v for k, v in client_config.items() if not _CONSUMER_ONLY.fullmatch(k)}))


#: the names of the brokers' answers to a commit that say to ask again (the admin API's errors do not say whether
#: they are retriable); a transport failure or a local timeout is an outage, which the planning waits out
_ASK_AGAIN = ("REQUEST_TIMED_OUT", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")


def commit_within(
    admin: Any,
    end: dict[str, int],
    table: str,
    group: str,
    seconds: float = COMMIT_TIMEOUT_SECONDS,
    report: bool = True,
) -> bool:
    """Commit ``end`` to ``group`` through ``admin`` within ``seconds``, asking again while the brokers say to (a
    coordinator loading or moving, as after a broker's start or restart); whether it landed (a failure is logged
    if ``report``). After a failure, ``admin`` may still hold a request waiting for the brokers: drop it and take a
    new client for the next commit."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

    ask_again = {getattr(KafkaError, name) for name in _ASK_AGAIN}
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(*split_offset_key(k), v) for k, v in sorted(end.items())]
    )
    deadline = time.monotonic() + seconds
    while True:
        left = max(deadline - time.monotonic(), 0.5)
        try:
            future = admin.alter_consumer_group_offsets([request], request_timeout=_REQUEST_TIMEOUT_SECONDS)[group]
            result = future.result(timeout=left)
            errors = [(f"{tp.topic}[{tp.partition}]: ", tp.error) for tp in result.topic_partitions if tp.error]
        except KafkaException as exc:
            errors = [("", exc.args[0])]
        except TimeoutError:
            errors = [("", None)]
        if not errors:
            return True
        if time.monotonic() + 0.5 < deadline and all(e is not None and e.code() in ask_again for _, e in errors):
            time.sleep(0.5)
            continue
        if report:
            reasons = "; ".join(where + (e.str() if e is not None else "timed out") for where, e in errors)
            log.warning(
                "stream '%s': committing offsets to group %s failed: %s. Nothing is lost: the checkpoint holds the "
                "position, and the next micro-batch's commit carries the group forward",
                table,
                group,
                reasons,
            )
        return False


def commit_offsets(client_config: dict[str, str], end: dict[str, int], table: str) -> None:
    """Commit ``end`` (``{"topic:partition": offset}``) to the group of ``client_config``."""
    commit_within(group_client(client_config), end, table, client_config["group.id"])


def commit_final_offsets(progress: dict, groups: dict[str, dict[str, str]]) -> None:
    """Commit the end offsets of a run's last micro-batch to each stream's consumer group.

    Spark calls a source's ``commit`` only when it plans the next micro-batch, so the offsets of a run's final
    batch would never reach the group without this. ``progress`` is the query's last progress; ``groups`` maps
    each Kafka stream (``INPUT_SCHEMA_TABLE``) to its client settings. A source's offsets name their stream, so two
    streams reading the same topic (a self-join, overlapping patterns) each commit their own position to their own
    group.
    """
    for source in (progress or {}).get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if not isinstance(end, dict) or end.get(STREAM_KEY) not in groups:
            continue
        table = end[STREAM_KEY]
        if positions(end):
            commit_offsets(groups[table], positions(end), table)
