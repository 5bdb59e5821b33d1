"""How fast ``dagger test`` is from launch: a file of 10 cases, and what each further case adds (issue 40's
targets: 10 cases in <= 20 s, <= 1 s per further case, on this machine).

Each run launches ``python -m dagger test configs/quickstart.json --tests FILE`` as a user would, for a file of
``N`` cases made from the quickstart's own (its bounded window count, its streaming late-data case, its
undecodable-record case, in turn, each with its own records), and times launch → exit. Files of 10 and 20 cases;
the difference over 10 is the cost of a further case. Results: ``bench/results/dagger_test.{json,md}``.

    .venv/bin/python bench/dagger_test.py            # DAGGER_TEST_RUNS (3) runs of each file, medians
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.json"
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR", ROOT / "bench" / "results"))


def cases(n: int) -> list[dict]:
    """``n`` cases, the quickstart's three in turn, each named apart."""
    base = json.loads(QUICKSTART.read_text())["TESTS"]
    out = []
    for i in range(n):
        case = copy.deepcopy(base[i % len(base)])
        case["NAME"] = f"{case['NAME']} #{i}"
        out.append(case)
    return out


def timed(n: int, directory: Path) -> tuple[float, str]:
    path = directory / f"cases-{n}.json"
    path.write_text(json.dumps(cases(n)))
    command = [sys.executable, "-m", "dagger", "test", str(QUICKSTART), "--tests", str(path)]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    seconds = time.monotonic() - started
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0 or last != f"{n} passed, 0 failed":
        raise SystemExit(f"dagger test of {n} cases did not pass: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    return seconds, result.stdout


def main() -> None:
    runs = int(os.environ.get("DAGGER_TEST_RUNS", "3"))
    figures: dict[int, list[float]] = {10: [], 20: []}
    per_case: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            for n in figures:  # back to back, same machine
                seconds, out = timed(n, Path(tmp))
                figures[n].append(seconds)
                per_case = [line for line in out.splitlines() if line.startswith("PASS")]
    median = {n: statistics.median(v) for n, v in figures.items()}
    further = (median[20] - median[10]) / 10
    result = {"runs": figures, "median_s": median, "further_case_s": further, "cases_of_the_last_run": per_case}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dagger_test.json").write_text(json.dumps(result, indent=2))
    lines = [
        "# `dagger test` from launch",
        "",
        f"`python bench/dagger_test.py` ({runs} runs of each file, medians; 2 cores). Cases: the quickstart's three "
        "(a bounded window count, a streaming late-data case of four micro-batches, an undecodable record) in turn.",
        "",
        "| file | launch → exit (median) | runs |",
        "|---|---|---|",
        *(f"| {n} cases | {median[n]:.1f} s | {', '.join(f'{s:.1f}' for s in figures[n])} |" for n in figures),
        "",
        f"A further case: **{further:.2f} s** ((20 cases − 10 cases) / 10).",
        "",
        "Per case, the last run of 20 (the first pays for Spark's start):",
        "",
        "```",
        *per_case,
        "```",
        "",
    ]
    (RESULTS / "dagger_test.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
