"""Records a sink wrote against the records a case expects: matched as a multiset (or in order with
``ORDERED``), on the fields given (``PARTIAL``), floats within ``TOLERANCE``; what differs, as a readable diff.

Pure Python, on the driver: the records are the sink's own output decoded back to plain values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rules:
    """How records are compared (a case's ``ORDERED``, ``PARTIAL`` and ``TOLERANCE``)."""

    ordered: bool = False
    partial: bool = False
    tolerance: float | None = None


@dataclass
class Diff:
    """What did not match: records expected and not written, written and not expected, and pairs that differ
    in some fields (each ``(where, expected, written, [(field path, expected value, written value)])``)."""

    missing: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)
    differing: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, Any, Any]]]] = field(
        default_factory=list
    )

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.differing)

    def lines(self) -> list[str]:
        """The diff as text, a line per record or field."""
        out = []
        for where, _, _, fields in self.differing:
            out.append(f"  ~ {where}:")
            out += [f"      {path}: expected {_show(want)}, got {_show(got)}" for path, want, got in fields]
        out += [f"  - missing: {_show(r)}" for r in self.missing]
        out += [f"  + unexpected: {_show(r)}" for r in self.unexpected]
        return out


def compare(expected: list[dict[str, Any]], written: list[dict[str, Any]], rules: Rules = Rules()) -> Diff:
    """The difference between what a sink wrote and what was expected (empty when they match)."""
    if rules.ordered:
        diff = Diff()
        for i, (want, got) in enumerate(zip(expected, written, strict=False)):
            fields = _differences(want, got, rules, "")
            if fields:
                diff.differing.append((f"record {i}", want, got, fields))
        diff.missing = list(expected[len(written) :])
        diff.unexpected = list(written[len(expected) :])
        return diff
    left = list(written)
    missing = []
    for want in expected:
        at = next((i for i, got in enumerate(left) if not _differences(want, got, rules, "")), None)
        if at is None:
            missing.append(want)
        else:
            left.pop(at)
    diff = Diff()
    for want in missing:  # a missing record beside the closest unexpected one reads as a change of fields
        scored = [(len(_differences(want, got, rules, "")), i) for i, got in enumerate(left)]
        best = min(scored, default=None)
        if best is not None and best[0] < max(len(want), 1):
            got = left.pop(best[1])
            diff.differing.append((f"expected {_show(want)}", want, got, _differences(want, got, rules, "")))
        else:
            diff.missing.append(want)
    diff.unexpected = left
    return diff


def in_expected_order(expected: list[dict[str, Any]], written: list[dict[str, Any]], rules: Rules) -> list[dict]:
    """``written`` with the records that stand for expected ones first, in the expected records' order (the
    closest for each), then the rest as written: an ``--update`` then changes only what differs."""
    left = list(written)
    out = []
    for want in expected:
        if not left:
            break
        scored = [(len(_differences(want, got, rules, "")), i) for i, got in enumerate(left)]
        out.append(left.pop(min(scored)[1]))
    return out + left


def only_compared(expected: list[dict[str, Any]], written: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``written`` with only the fields a ``PARTIAL`` case's ``expected`` records list (at any depth), so that
    an ``--update`` keeps comparing what the case compared; whole records when it lists none."""
    shape: dict[str, Any] = {}
    for record in expected:
        _merge_shape(shape, record)
    return [_cut(record, shape) for record in written] if shape else list(written)


def _merge_shape(shape: dict[str, Any], record: dict[str, Any]) -> None:
    for key, value in record.items():
        if isinstance(value, dict):
            inner = shape.get(key)
            shape[key] = inner if isinstance(inner, dict) else {}
            _merge_shape(shape[key], value)
        else:
            shape.setdefault(key, None)


def _cut(record: Any, shape: dict[str, Any]) -> Any:
    if not isinstance(record, dict):
        return record
    return {k: _cut(v, shape[k]) if shape[k] else v for k, v in record.items() if k in shape}


def _differences(want: Any, got: Any, rules: Rules, path: str) -> list[tuple[str, Any, Any]]:
    if isinstance(want, dict) and isinstance(got, dict):
        keys = list(want) if rules.partial else list(dict.fromkeys([*want, *got]))
        out = []
        for key in keys:
            where = f"{path}.{key}" if path else key
            if key not in got:
                out.append((where, want[key], "(absent)"))
            elif key not in want:
                out.append((where, "(absent)", got[key]))
            else:
                out += _differences(want[key], got[key], rules, where)
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in _differences(w, g, rules, f"{path}[{i}]")
        ]
    return [] if _same(want, got, rules) else [(path or "record", want, got)]


def _same(want: Any, got: Any, rules: Rules) -> bool:
    numbers = (int, float)
    if isinstance(want, numbers) and isinstance(got, numbers) and not isinstance(want, bool | None):
        if isinstance(got, bool):
            return False
        if rules.tolerance is not None and (isinstance(want, float) or isinstance(got, float)):
            return abs(want - got) <= rules.tolerance
        return want == got
    return want == got and type(want) is type(got)


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=False, default=str, ensure_ascii=False)
