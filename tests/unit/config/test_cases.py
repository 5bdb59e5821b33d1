"""The shape of a job's test cases (dagger.config.cases): what a case must say, and what it may not mix."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from dagger.config.cases import CaseConfig, check_names


def _case(**keys) -> dict:
    return {
        "NAME": "a window count",
        "INPUT": {"bookings": [{"order_number": "o-1"}]},
        "EXPECTED": {"SINK": []},
        **keys,
    }


def test_a_bounded_case_with_input_and_expected_records():
    case = CaseConfig(**_case(ORDERED=True, TOLERANCE=0.01, ENVIRONMENT={"TOPIC": "t"}))
    assert case.MODE == "bounded" and case.ORDERED and case.TOLERANCE == 0.01 and case.MOCKS == []
    assert case.INPUT == {"bookings": [{"order_number": "o-1"}]}


def test_a_streaming_case_feeds_batches_and_counts_late_records():
    case = CaseConfig(
        NAME="late",
        INPUT_BATCHES=[{"bookings": []}, {"bookings": [{"_RAW_BASE64": "AA=="}]}],
        MODE="streaming",
        EXPECTED_LATE=1,
    )
    assert len(case.INPUT_BATCHES) == 2 and case.EXPECTED is None


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ({"INPUT_BATCHES": [{}], "MODE": "streaming"}, "not both or neither"),
        ({"INPUT": None}, "not both or neither"),
        ({"INPUT": None, "INPUT_BATCHES": [{}]}, "set MODE to 'streaming'"),
        ({"EXPECTED_LATE": 1}, "EXPECTED_LATE needs MODE 'streaming'"),
        ({"EXPECTED": None}, "say what must come out"),
        ({"EXPECTED_ERROR": "boom"}, "expects no output"),
        ({"INPUT": {"t": [{"_RAW_BASE64": "AA==", "x": 1}]}}, re.escape("t[0]: a _RAW_BASE64 record holds nothing")),
        ({"EXPECTD": {}}, "Extra inputs are not permitted"),
        ({"MODE": "batch"}, "'bounded' or 'streaming'"),
        ({"TOLERANCE": -1}, "greater than or equal to 0"),
    ],
)
def test_a_case_that_mixes_or_lacks_keys_is_refused_saying_why(keys, says):
    with pytest.raises(ValidationError, match=says):
        CaseConfig(**_case(**keys))


def test_names_are_unique():
    check_names([CaseConfig(**_case()), CaseConfig(**_case(NAME="other"))])
    with pytest.raises(ValueError, match="two test cases are named 'a window count'"):
        check_names([CaseConfig(**_case()), CaseConfig(**_case())])
