"""The README and docs/ hold together: every relative link and image resolves, every anchor names a heading.

For README.md and every ``docs/**/*.md``, each relative Markdown link or image (inline ``[text](target)``,
``![alt](target)`` and reference definitions ``[id]: target``; not inside fenced code blocks or inline code)
must name an existing file or folder, and each ``#anchor`` (``#x`` in the same file, ``file.md#x`` in another)
must be the slug of a heading of the target file, as GitHub makes them: inline Markdown stripped, lower case,
every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces turned into hyphens, and a repeated
slug given ``-1``, ``-2``, … in order. ``http(s)://`` and ``mailto:`` links are not checked. Each broken link is
named with its file and line. Pure Python: no server, no Spark.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets ([`a[0]`](x) after code
# spans are blanked, or an image inside a link)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
_SKIPPED = ("http://", "https://", "mailto:")


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _outside_code(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(lines, 1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
            continue
        yield number, line


def _plain(heading: str) -> str:
    """A heading's text as GitHub renders it: code spans kept as text, links as their text, markup dropped."""
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w))", "", text)  # emphasis markers, not snake_case
    return text.strip()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (before de-duplication)."""
    kept = []
    for char in _plain(heading).lower():
        if char in " -_" or unicodedata.category(char)[0] in "LNM":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of ``path``: its headings' slugs (repeats numbered as GitHub does) and HTML anchors."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: set[str] = set()
    seen: dict[str, int] = {}
    previous = ""

    def add(heading: str) -> None:
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")

    for _, line in _outside_code(lines):
        atx = _ATX.match(line)
        if atx:
            add(atx.group(2))
        elif (
            _SETEXT.match(line)
            and previous.strip()
            and not _ATX.match(previous)
            and not previous.lstrip().startswith(("|", "-", "*", ">"))
        ):
            add(previous)
        found.update(_HTML_ANCHOR.findall(line))
        previous = line
    return found


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, target) of every Markdown link, image and reference definition of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in _outside_code(lines):
        text = _CODE_SPAN.sub(lambda m: "`" + " " * len(m.group(2)) + "`", line)  # no links inside code
        for match in _INLINE_LINK.finditer(text):
            yield number, match.group(1).strip("<>")
        reference = _REFERENCE.match(text)
        if reference:
            yield number, reference.group(1).strip("<>")


def broken_links(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``file:line: target: why`` for every relative link of ``files`` that does not resolve."""
    problems = []
    cache: dict[Path, set[str]] = {}
    for path in files:
        for number, target in links(path):
            if not target or target.lower().startswith(_SKIPPED):
                continue
            where = f"{path.relative_to(root)}:{number}: {target}"
            file_part, _, anchor = target.partition("#")
            file_part = unquote(file_part)
            if not file_part:
                resolved = path
            elif file_part.startswith("/"):
                resolved = root / file_part.lstrip("/")
            else:
                resolved = path.parent / file_part
            if not resolved.exists():
                problems.append(f"{where}: no such file ({os.path.relpath(resolved, root)})")
                continue
            if anchor and resolved.is_file() and resolved.suffix == ".md":
                resolved = resolved.resolve()
                if resolved not in cache:
                    cache[resolved] = anchors(resolved)
                if unquote(anchor) not in cache[resolved]:
                    problems.append(f"{where}: no heading with the anchor #{anchor} in {resolved.name}")
    return problems


def test_every_relative_link_of_the_readme_and_docs_resolves():
    problems = broken_links(doc_files())
    assert not problems, f"{len(problems)} broken link(s):\n" + "\n".join(problems)


def test_the_readme_is_at_most_200_lines():
    count = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, (
        f"README.md has {count} lines (at most {README_MAX_LINES}): move detail to a docs/ page"
    )


def test_the_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Event time: what is late?\n\n## Setup\n\n## Setup\n")
    (tmp_path / "README.md").write_text(
        "# Project\n"
        "See [the guide](docs/guide.md#event-time-what-is-late) and [setup](docs/guide.md#setup-1).\n"
        "[Gone](docs/missing.md) and ![a picture](docs/img.png).\n"
        "A [wrong anchor](docs/guide.md#setup-2), [here](#project), [not here](#nowhere).\n"
        "`[code](not-a-link.md)` and [web](https://example.com/x.md) are not checked.\n"
        "```\n[in a block](also-not-checked.md)\n```\n"
    )
    problems = broken_links(doc_files(tmp_path), root=tmp_path)
    assert problems == [
        "README.md:3: docs/missing.md: no such file (docs/missing.md)",
        "README.md:3: docs/img.png: no such file (docs/img.png)",
        "README.md:4: docs/guide.md#setup-2: no heading with the anchor #setup-2 in guide.md",
        "README.md:4: #nowhere: no heading with the anchor #nowhere in README.md",
    ]


def test_slugs_follow_githubs_rules():
    assert slug("Event time: what moves the watermark, and what is late") == (
        "event-time-what-moves-the-watermark-and-what-is-late"
    )
    assert slug("Sink keys (top level for one sink, or each element of `SINKS`)") == (
        "sink-keys-top-level-for-one-sink-or-each-element-of-sinks"
    )
    assert slug("`SINK_TYPE=kafka`") == "sink_typekafka"
    assert slug("Replaying Kafka: `dagger run CONFIG --from … --to …`") == (
        "replaying-kafka-dagger-run-config---from----to-"
    )
    assert slug("**Bold** and [a link](x.md)") == "bold-and-a-link"
