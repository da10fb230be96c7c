"""Every citation in the code and the docs resolves to something in this repository.

The citation forms are listed in ``docs/design.md`` ("Citations"):

- ``format §N.M`` -> a numbered heading of ``docs/format.md``;
- ``SlateDB RFC-00NN`` -> an upstream RFC listed in ``docs/design.md``;
- ``docs/rfcs/NNNN-*.md`` -> a file of this repository;
- ``design doc 'NAME'`` -> a named design document listed in ``docs/design.md``.

Older forms ("spec N.M", "seed 00N", a bare "RFC-00NN") and paths outside the repository
(``shared/spec/``, ``shared/seeds/``) fail, naming the file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest


def _repo_root() -> Path:
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / "slatelib").is_dir():
            return parent
    raise RuntimeError("repository root not found")


ROOT = _repo_root()
FORMAT_MD = ROOT / "docs" / "format.md"
DESIGN_MD = ROOT / "docs" / "design.md"
RFCS_DIR = ROOT / "docs" / "rfcs"

# The legacy forms may appear only in this block of docs/design.md, which maps them.
MAP_START = "<!-- citation-map:start"
MAP_END = "<!-- citation-map:end -->"

SECTION = r"\d+(?:\.\d+)*"
HEADING = re.compile(rf"^#{{2,4}}\s+({SECTION})\.?\s", re.MULTILINE)
SPEC_CITE = re.compile(r"\bspec(?:\s+section|,\s*section)?\s+§?\d", re.IGNORECASE)
SEED_CITE = re.compile(r"\bseeds?\s+0\d\d\b", re.IGNORECASE)
RFC_CITE = re.compile(r"\bRFC[- ]?(0\d{3})\b", re.IGNORECASE)
SLATEDB_BEFORE = re.compile(r"SlateDB(?:\s|#|\*|//|\"|`)*$")
SECTION_CITE = re.compile(rf"§\s?({SECTION})(?:\s?[-–]\s?§?({SECTION}))?")
LOCAL_RFC = re.compile(r"docs/rfcs/(\d{4})((?:-[\w-]*)?(?:\.md)?)")
DESIGN_DOC = re.compile(r"\bdesign\s+docs?\s+('[^']+'(?:(?:\s*,\s*|\s+)(?:and\s+)?'[^']+')*)",
                        re.IGNORECASE)
QUOTED = re.compile(r"'([^']+)'")
CONTINUATION = re.compile(r"\n\s*(?:#|\*|//)?")  # a name wrapped onto a comment's next line
OUTSIDE = re.compile(r"shared/(?:spec|seeds)/")
LISTED_RFC = re.compile(r"^\|\s*`SlateDB RFC-(\d{4})`", re.MULTILINE)
LISTED_DOC = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for top in ("slatelib", "jobs", "airflow_dags"):
        for path in sorted((ROOT / top).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in (".py", ".c"):
                files.append(path)
    files += sorted((ROOT / "docs").rglob("*.md"))
    files.append(ROOT / "README.md")
    return files


def format_sections() -> set[str]:
    return set(HEADING.findall(FORMAT_MD.read_text(encoding="utf-8")))


def listed_rfcs() -> set[str]:
    return set(LISTED_RFC.findall(DESIGN_MD.read_text(encoding="utf-8")))


def listed_design_docs() -> set[str]:
    """The names in the table that follows "Named design documents" in docs/design.md."""
    text = DESIGN_MD.read_text(encoding="utf-8")
    start = text.index("Named design documents")
    end = text.find("\n## ", start)
    return set(LISTED_DOC.findall(text[start:end if end >= 0 else len(text)]))


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _exempt_spans(path: Path, text: str) -> list[tuple[int, int]]:
    if path != DESIGN_MD:
        return []
    start = text.find(MAP_START)
    end = text.find(MAP_END)
    return [(start, end)] if 0 <= start < end else []


def problems(path: Path, sections: set[str], rfcs: set[str], docs: set[str]) -> Iterator[str]:
    text = path.read_text(encoding="utf-8")
    yield from check_text(text, str(path.relative_to(ROOT)), _exempt_spans(path, text),
                          sections, rfcs, docs)


def check_text(text: str, rel: str, exempt: list[tuple[int, int]], sections: set[str],
               rfcs: set[str], docs: set[str]) -> Iterator[str]:
    """Problems of one file's ``text`` (``rel``: its name in messages)."""

    def at(offset: int, message: str) -> str:
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        line = text[start:end if end >= 0 else len(text)].strip()
        return f"{rel}:{_line(text, offset)}: {message}\n    {line[:120]}"

    def exempted(offset: int) -> bool:
        return any(a <= offset < b for a, b in exempt)

    for m in SPEC_CITE.finditer(text):
        if not exempted(m.start()):
            yield at(m.start(), "a 'spec N' citation: use 'format §N.M' (docs/format.md)")
    for m in SEED_CITE.finditer(text):
        if not exempted(m.start()):
            yield at(m.start(), f"'{m.group(0)}' cites a seed; use design doc 'NAME' "
                                "(listed in docs/design.md)")
    for m in RFC_CITE.finditer(text):
        if exempted(m.start()):
            continue
        if not SLATEDB_BEFORE.search(text[max(0, m.start() - 40):m.start()]):
            yield at(m.start(), f"'{m.group(0)}' is ambiguous; write 'SlateDB RFC-{m.group(1)}' "
                                "for SlateDB's RFCs or a docs/rfcs/NNNN-*.md path for ours")
        elif m.group(1) not in rfcs:
            yield at(m.start(), f"SlateDB RFC-{m.group(1)} is not listed in docs/design.md")
    for m in SECTION_CITE.finditer(text):
        for number in filter(None, m.groups()):
            if number not in sections:
                yield at(m.start(), f"'§{number}' is not a section of docs/format.md")
    for m in LOCAL_RFC.finditer(text):
        number, rest = m.group(1), m.group(2).rstrip("-")
        if rest.startswith("-"):
            name = rest if rest.endswith(".md") else rest + ".md"
            if not (RFCS_DIR / f"{number}{name}").is_file():
                yield at(m.start(), f"'{m.group(0)}' does not exist")
        elif not list(RFCS_DIR.glob(f"{number}-*.md")):
            yield at(m.start(), f"'{m.group(0)}': no docs/rfcs/{number}-*.md")
    for m in DESIGN_DOC.finditer(text):
        for quoted in QUOTED.findall(m.group(1)):
            name = " ".join(CONTINUATION.sub(" ", quoted).split())
            if name not in docs and not name.isupper():  # NAME: a placeholder
                yield at(m.start(), f"design doc '{name}' is not listed in docs/design.md")
    for m in OUTSIDE.finditer(text):
        yield at(m.start(), f"'{m.group(0)}' is outside the repository")


def test_format_md_has_numbered_sections() -> None:
    sections = format_sections()
    assert {"1", "2", "3", "5.5.2", "5.7", "7.12", "8.3", "10", "12", "13"} <= sections
    assert len(sections) >= 40


def test_design_md_lists_the_upstream_documents() -> None:
    assert {"0012", "0024", "0025", "0026", "0029"} <= listed_rfcs()
    assert "checkpoints and clones" in listed_design_docs()
    text = DESIGN_MD.read_text(encoding="utf-8")
    assert text.count(MAP_START) == 1 and text.count(MAP_END) == 1
    span = text[text.index(MAP_START):text.index(MAP_END)]
    assert span.count("\n") <= 12, "the exempt citation map must stay short"


def test_every_citation_resolves() -> None:
    files = scanned_files()
    assert len(files) > 50
    sections, rfcs, docs = format_sections(), listed_rfcs(), listed_design_docs()
    found = [p for path in files for p in problems(path, sections, rfcs, docs)]
    assert not found, f"{len(found)} unresolved citation(s):\n" + "\n".join(found)


@pytest.mark.parametrize(("line", "bad"), [
    ("Read semantics (spec 10).", True),
    ("see the spec, section 13", True),
    ("(seed 002 'Clones')", True),
    ("segments (RFC-0024)", True),
    ("(rfc 0002)", True),
    ("format §99.1", True),
    ("docs/rfcs/0099-nothing.md", True),
    ("design doc 'no such thing'", True),
    ("../shared/spec/slatedb-format.md", True),
    ("segments (SlateDB RFC-0024)", False),
    ("SlateDB\n    RFC-0029 cutoff", False),
    ("format §5.5.2-5.5.3 and format §1, §4", False),
    ("docs/rfcs/0006-local-conditional-put.md.", False),
    ("design docs 'manifest' and 'checkpoints and clones'", False),
    ("(design doc 'checkpoints and\n    # clones')", False),
    ("cite as `design doc 'NAME'`", False),
    ("read_ulids(spec, 2); zlib stream (RFC 1950); random.Random(seed)", False),
])
def test_the_checks_themselves(line: str, bad: bool) -> None:
    found = list(check_text(line + "\n", "sample.md", [], format_sections(), listed_rfcs(),
                            listed_design_docs()))
    assert bool(found) is bad, found
