"""The ``slate health --html`` page in headless Chromium (Debian's ``chromium``, installed by
``make test``/``make test-integration``): it renders without script errors, shows one row
per database, and a screenshot of it is a picture (the expected size, many colours, the bar
and L0-line colours among them), not a blank page."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from slatelib.cli import main as slate
from slatelib.objstore import open_store
from slatelib.ops.compaction.status_history import StatusHistory
from slatelib.paths import DbPaths
from tests.compaction_fixtures import NOW_MS
from tests.unit.cli.test_health_cmd import fleet  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1400, 1300
BAR = (0x3F, 0x6F, 0xD8)  # svg .bar in slatelib/cli/health_html.py
L0_LINE = (0xE0, 0x7B, 0x00)  # svg .l0


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is not installed: the health page tests need it "
                    "(make test-integration installs it: apt-get install -y chromium)")
    return found


def browse(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp / 'profile'}", "--disable-dev-shm-usage", *args],
        capture_output=True, text=True, timeout=180, check=False)


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and RGB pixels of an 8-bit RGB or RGBA PNG (zlib and the five filters)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height, depth, color = struct.unpack(">IIBB", head[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        pixels += [tuple(line[i:i + 3]) for i in range(0, stride, bpp)]
        prev = line
    return width, height, pixels


@pytest.fixture
def page(fleet: Path, tmp_path: Path) -> Path:  # noqa: F811 - the imported fixture
    open_store(f"file://{fleet}").put(DbPaths.of("fleet/bad").manifest(1), b"junk")
    history = tmp_path / "history.jsonl"
    h = StatusHistory(str(history), interval_s=0)
    for i, depth in enumerate((1, 3, 6, 4, 2, 3)):
        h.append(NOW_MS + i * 60_000, float(i), {f"file:{fleet}/fleet/a": (depth, 1),
                                                 f"file:{fleet}/fleet/sub/c": (i % 2, 0)})
    out = tmp_path / "health.html"
    code = slate(["health", "--format", "json", "--discover", f"file://{fleet}/fleet/",
                  "--max-l0", "5", "--html", str(out), "--status-history", str(history)])
    assert code == 5  # fleet/bad is unreadable; the page is written all the same
    return out


def test_the_page_renders_without_errors_with_a_row_per_database(page: Path,
                                                                 tmp_path: Path) -> None:
    proc = browse(tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"<html[^>]*>", proc.stdout)
    assert m is not None, proc.stdout[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(0)))
    assert attrs.get("data-rendered") == "1", attrs  # the script ran to the end
    assert attrs.get("data-errors") == "0", attrs
    assert attrs.get("data-rows") == "4"  # a, b, bad, sub/c
    assert attrs.get("data-charts") == "3"  # a: runs and L0; c: L0 (b has neither)
    body = proc.stdout[proc.stdout.index("<tbody>"):proc.stdout.index("</tbody>")]
    rows = re.findall(r'<tr class="status-(\w+)"><td class="db">([^<]*)</td>', body)
    assert [(s, n.rsplit("fleet/", 1)[1]) for s, n in rows] == [
        ("ok", "a"), ("ok", "b"), ("error", "bad"), ("ok", "sub/c")]


def test_a_screenshot_of_the_page_is_not_blank(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    proc = browse(tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                  page.as_uri())
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    colors = Counter(pixels)
    background, most = colors.most_common(1)[0]
    assert len(colors) > 50  # text, table stripes, charts
    assert most / len(pixels) < 0.9  # not one colour with a few specks
    assert colors[BAR] > 100 and colors[L0_LINE] > 50, (colors[BAR], colors[L0_LINE])
