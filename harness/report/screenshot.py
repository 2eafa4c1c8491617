"""The report in a real browser: headless Chromium at 1400 px, checked for sideways overflow,
and the README's screenshot taken from a real run, with its provenance.

    python -m harness.report.screenshot [--reports reports] [--out reports/screenshots]

reads ``reports/matrix.json`` (what ``nox -s matrix`` rendered), re-renders the page from it,
fails if anything sticks out sideways at 1400 px, then writes ``out/matrix.json`` (the data the
picture shows) and ``out/matrix.png`` (1400 px wide). The PNG carries two tEXt chunks: the
sha256 of that JSON and of the HTML rendered from it. The harness tests re-render the HTML from
the committed JSON with the current templates and compare, so a changed page means a retaken
screenshot, and they check that the JSON holds real cells of matrix.toml.
"""

from __future__ import annotations

import argparse
import hashlib
import html as html_lib
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

from harness.matrix import paths
from harness.matrix.errors import Refused
from harness.report import pages as report

WIDTH, HEIGHT = 1400, 1000
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
DATA_KEY, HTML_KEY = "compat-matrix-data-sha256", "compat-matrix-html-sha256"
# Injected before </body> of a copy of the page: what sticks out past the viewport's right
# edge, and which elements scroll sideways inside themselves.
LAYOUT_PROBE = """<script>
(() => {
  const width = window.innerWidth, out = [], scrolls = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    const name = el.tagName.toLowerCase() + (el.className ? "." + el.className : "");
    if (box.right > width + 0.5) out.push(name + ": " + (el.textContent || "").slice(0, 60));
    const style = getComputedStyle(el);
    if (["auto", "scroll"].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
      scrolls.push(name + ": " + (el.textContent || "").slice(0, 60));
  }
  const doc = document.documentElement;
  const found = {width, scrollWidth: doc.scrollWidth};
  found.outside = out.slice(0, 20);
  found.scrolls = scrolls.slice(0, 20);
  document.body.setAttribute("data-layout", JSON.stringify(found));
})();
</script>"""


# the runner's own Chrome first (GitHub's ubuntu-24.04 image ships one), then Debian's Chromium
BROWSERS = ("google-chrome", "google-chrome-stable", "chromium", "chromium-browser")


def chromium() -> str | None:
    return next(filter(None, map(shutil.which, BROWSERS)), None)


def browser(args: list[str], width: int, height: int) -> str:
    """Headless Chromium run with ``args`` at ``width`` x ``height``, fresh profile; its stdout."""
    binary = chromium()
    if binary is None:
        raise RuntimeError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile each time
        cmd = [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        done = subprocess.run(
            [*cmd, *args], capture_output=True, text=True, timeout=120, check=True
        )
    return done.stdout


def layout(page: str, width: int = WIDTH) -> dict[str, Any]:
    """How ``page`` (HTML text) lays out at ``width``: scrollWidth, and what overflows."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        path.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>", 1))
        dom = browser(["--dump-dom", path.as_uri()], width, HEIGHT)
    found = re.search(r'data-layout="([^"]*)"', dom)
    if found is None:
        raise RuntimeError("the layout probe did not run in the browser")
    return dict(json.loads(html_lib.unescape(found.group(1))))


def overflow(measured: dict[str, Any]) -> list[str]:
    """Why the page would show a horizontal scrollbar (empty: it fits)."""
    problems = []
    if measured["scrollWidth"] > measured["width"]:
        problems.append(f"page is {measured['scrollWidth']} px wide at {measured['width']} px")
    problems += [f"sticks out: {what}" for what in measured["outside"]]
    problems += [f"scrolls sideways: {what}" for what in measured["scrolls"]]
    return problems


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def with_text(png: bytes, text: dict[str, str]) -> bytes:
    """``png`` with tEXt chunks added right after its header."""
    head = 8 + 8 + 13 + 4  # signature, IHDR length+type, IHDR data, CRC
    extra = b"".join(_chunk(b"tEXt", f"{k}\0{v}".encode("latin-1")) for k, v in text.items())
    return png[:head] + extra + png[head:]


def png_info(png: bytes) -> tuple[int, int, dict[str, str]]:
    """Width, height and the tEXt chunks of a PNG."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise Refused("not a PNG")
    width, height = struct.unpack(">II", png[16:24])
    text, at = {}, 8
    while at < len(png):
        (length,), kind = struct.unpack(">I", png[at : at + 4]), png[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, value = png[at + 8 : at + 8 + length].partition(b"\0")
            text[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return width, height, text


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def take(reports: Path, out: Path, width: int = WIDTH, height: int = HEIGHT) -> Path:
    data_bytes = (reports / "matrix.json").read_bytes()
    page = report.render_html(json.loads(data_bytes))
    problems = overflow(layout(page, width))
    if problems:
        raise RuntimeError("the report does not fit at 1400 px: " + "; ".join(problems))
    out.mkdir(parents=True, exist_ok=True)
    (out / "matrix.json").write_bytes(data_bytes)
    shot = out / "matrix.png"
    with tempfile.TemporaryDirectory() as tmp:
        html_file, png_file = Path(tmp) / "matrix.html", Path(tmp) / "shot.png"
        html_file.write_text(page)
        browser([f"--screenshot={png_file}", html_file.as_uri()], width, height)
        provenance = {DATA_KEY: sha256(data_bytes), HTML_KEY: sha256(page.encode())}
        shot.write_bytes(with_text(png_file.read_bytes(), provenance))
    return shot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.screenshot")
    parser.add_argument("--reports", type=Path, default=paths.DEFAULT_REPORTS)
    parser.add_argument("--out", type=Path, default=paths.DEFAULT_REPORTS / "screenshots")
    args = parser.parse_args(argv)
    try:
        shot = take(args.reports, args.out)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{shot} ({WIDTH} px) from {args.reports / 'matrix.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
