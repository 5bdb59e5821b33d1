"""``dagger test CONFIG``: run a job's test cases and say, one line per case, which pass (runs in the
``dagger test`` process).

Exit codes: 0 every case passed, 1 a case failed, 2 the config or a test file is invalid (a case that cannot
run as written). The last line is always ``N passed, N failed``.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, TextIO

from dagger.errors import DaggerConfigError
from dagger.testing.harness import Harness
from dagger.testing.loading import CaseFileError, load_cases
from dagger.testing.update import update_file

if TYPE_CHECKING:
    import argparse


def run_tests(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the cases ``args`` name (``config``, ``tests``, ``k``, ``overrides``); the exit code."""
    out = out or sys.stdout
    if not args.config:
        print("dagger test: give the job's config file (dagger test job.json)", file=sys.stderr)
        return 2
    logger = logging.getLogger("dagger")
    level = logger.level
    if not args.verbose:  # the cases' own lines are the output; the job's start lines are for --verbose
        logger.setLevel(logging.WARNING)
    try:
        return _run(args, out)
    finally:
        logger.setLevel(level)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        cases = load_cases(args.config, args.tests, args.k)
    except DaggerConfigError as exc:
        print(f"dagger test: {exc}", file=sys.stderr)
        return 2
    passed = failed = invalid = 0
    updates: dict[str, tuple[dict, dict]] = {}
    harness = Harness(args.config, args.overrides)
    if harness.real_time():
        out.write(
            "this job runs in Spark's real-time mode (SPARK_TRIGGER_MODE=real-time); its cases run as micro-batches\n"
        )
    try:
        for case in cases:
            try:
                outcome = harness.run(case, getattr(args, "restore_check", False))
            except (CaseFileError, DaggerConfigError) as exc:
                invalid += 1
                out.write(f"ERROR {case.NAME}: {exc}\n")
                continue
            except Exception as exc:  # the tester itself failed: the case is not passed, the others still run
                if args.verbose:
                    raise
                failed += 1
                text = (str(exc).strip().splitlines() or [""])[0]
                out.write(f"FAIL  {case.NAME}\n      dagger test could not finish it: {type(exc).__name__}: {text}\n")
                continue
            if outcome.passed:
                passed += 1
                out.write(f"PASS  {outcome.name} ({outcome.seconds:.1f} s)\n")
            elif getattr(args, "update", False) and outcome.error is None:
                updates[outcome.name] = (outcome.written, outcome.counts)
                out.write(f"UPDATE {outcome.name} ({outcome.seconds:.1f} s)\n")
                out.write("".join(f"      {line}\n" for line in outcome.lines))
            else:
                failed += 1
                out.write(f"FAIL  {outcome.name} ({outcome.seconds:.1f} s)\n")
                out.write("".join(f"      {line}\n" for line in outcome.lines))
            out.flush()
    finally:
        harness.close()
    if updates:
        try:
            done = update_file(args.tests or args.config, updates)
        except DaggerConfigError as exc:
            print(f"dagger test: {exc}", file=sys.stderr)
            return 2
        out.write(f"updated the expectations of {len(done)} case(s) in {args.tests or args.config}\n")
    errors = f", {invalid} could not run" if invalid else ""
    updated = f", {len(updates)} updated" if updates else ""
    out.write(f"{passed} passed, {failed} failed{updated}{errors}\n")
    return 2 if invalid else 1 if failed else 0
