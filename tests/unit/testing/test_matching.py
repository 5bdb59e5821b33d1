"""Written records against expected ones (dagger.testing.matching): a multiset or in order, partial, floats
within a tolerance, and a diff that names missing and unexpected records and the fields that differ."""

from __future__ import annotations

from dagger.testing.matching import Rules, compare, only_compared


def test_records_match_in_any_order_as_a_multiset():
    written = [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "a", "n": 1}]
    assert compare([{"k": "a", "n": 1}, {"k": "a", "n": 1}, {"k": "b", "n": 2}], written).ok
    diff = compare([{"k": "a", "n": 1}, {"k": "b", "n": 2}], written)
    assert not diff.ok and diff.unexpected == [{"k": "a", "n": 1}] and not diff.missing


def test_ordered_compares_position_by_position():
    diff = compare([{"n": 1}, {"n": 2}], [{"n": 2}, {"n": 1}], Rules(ordered=True))
    assert [where for where, *_ in diff.differing] == ["record 0", "record 1"]
    assert compare([{"n": 1}, {"n": 2}], [{"n": 1}, {"n": 2}], Rules(ordered=True)).ok
    short = compare([{"n": 1}, {"n": 2}], [{"n": 1}], Rules(ordered=True))
    assert short.missing == [{"n": 2}] and not short.unexpected


def test_partial_compares_only_the_fields_given_and_nested_ones_too():
    written = [{"k": "a", "n": 1, "at": {"lat": 1.0, "lon": 2.0}}]
    assert compare([{"k": "a", "at": {"lat": 1.0}}], written, Rules(partial=True)).ok
    assert not compare([{"k": "a", "at": {"lat": 1.0}}], written).ok


def test_floats_match_within_the_tolerance_and_ints_are_not_booleans():
    assert compare([{"x": 0.3}], [{"x": 0.1 + 0.2}], Rules(tolerance=1e-9)).ok
    assert not compare([{"x": 0.3}], [{"x": 0.1 + 0.2}]).ok
    assert compare([{"x": 2}], [{"x": 2.0}]).ok
    assert not compare([{"x": 1}], [{"x": True}]).ok
    assert not compare([{"x": "1"}], [{"x": 1}]).ok


def test_the_diff_pairs_a_missing_record_with_the_closest_unexpected_one_and_names_the_fields():
    diff = compare(
        [{"area": "n", "count": 3, "window": "10:01"}, {"area": "s", "count": 1, "window": "10:01"}],
        [{"area": "n", "count": 4, "window": "10:01"}, {"area": "e", "count": 9, "window": "11:00"}],
    )
    assert diff.lines() == [
        '  ~ expected {"area": "n", "count": 3, "window": "10:01"}:',
        "      count: expected 3, got 4",
        '  - missing: {"area": "s", "count": 1, "window": "10:01"}',  # every field differs: not the same record
        '  + unexpected: {"area": "e", "count": 9, "window": "11:00"}',
    ]


def test_missing_and_unexpected_records_are_listed_when_nothing_is_close():
    diff = compare([{"a": 1}], [{"b": 2}, {"c": 3}])
    assert diff.missing == [{"a": 1}] and diff.unexpected == [{"b": 2}, {"c": 3}]
    assert diff.lines() == ['  - missing: {"a": 1}', '  + unexpected: {"b": 2}', '  + unexpected: {"c": 3}']
    absent = compare([{"a": 1, "b": 2}], [{"a": 1}], Rules(ordered=True))
    assert absent.differing[0][3] == [("b", 2, "(absent)")]


def test_written_records_are_put_in_the_expected_order_for_an_update():
    from dagger.testing.matching import in_expected_order

    expected = [{"k": "a", "n": 1}, {"k": "b", "n": 2}]
    written = [{"k": "c", "n": 3}, {"k": "b", "n": 5}, {"k": "a", "n": 1}]
    assert in_expected_order(expected, written, Rules()) == [{"k": "a", "n": 1}, {"k": "b", "n": 5}, {"k": "c", "n": 3}]


def test_only_compared_keeps_the_fields_partial_expectations_list_at_any_depth():
    expected = [{"id": 1, "geo": {"lat": 1.0}}, {"name": "b"}]
    written = [{"id": 2, "name": "x", "extra": 3, "geo": {"lat": 2.0, "lon": 3.0}}, {"id": 4, "geo": 5}]
    assert only_compared(expected, written) == [
        {"id": 2, "name": "x", "geo": {"lat": 2.0}},
        {"id": 4, "geo": 5},  # a value that is not a record is kept as it is
    ]


def test_only_compared_keeps_whole_records_when_nothing_is_expected():
    written = [{"id": 2, "name": "x"}]
    assert only_compared([], written) == written
