"""A real headless browser for the HTML tests: Chromium (Debian's `chromium` package, or
Chrome), else Firefox (screenshots only). Tests skip, naming what to install, without one."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MISSING = ("no headless browser on PATH (looked for chromium, chromium-browser, google-chrome, firefox): "
           "install one, e.g. `apt-get install -y chromium` (.ci/run does)")

# Appended to a copy of a page: measures what the browser laid out and writes it into the DOM,
# which --dump-dom then returns. The pages themselves carry no script.
PROBE = """<script>
(function () {
  const errors = [];
  window.addEventListener("error", e => errors.push(String(e.message)));
  function box(el) { const b = el.getBBox(); return [b.x, b.y, b.width, b.height]; }
  const nodes = {}, overflow = [];
  for (const g of document.querySelectorAll("svg.graph g.node")) {
    const frame = g.querySelector(".box"), [x, y, w, h] = box(frame);
    nodes[g.dataset.node] = {status: g.dataset.status || null, w: w, h: h};
    for (const t of g.querySelectorAll("text")) {
      const [tx, ty, tw, th] = box(t);
      if (tx < x - 1 || tx + tw > x + w + 1) overflow.push(g.dataset.node + ": " + t.textContent);
    }
  }
  const series = [...document.querySelectorAll("svg.chart path.series")].map(
    p => ({metric: p.closest("svg").dataset.metric, length: p.getTotalLength()}));
  const rows = [...document.querySelectorAll("svg.timeline g.row")].map(
    r => ({node: r.dataset.node, status: r.dataset.status, bars: r.querySelectorAll("rect.attempt").length}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({nodes, overflow, series, rows, errors,
                                    width: document.documentElement.scrollWidth});
  document.body.appendChild(out);
})();
</script>"""


def find() -> tuple[str, str] | None:
    """(kind, executable): kind "chromium" or "firefox"; None when neither is installed."""
    for name in CHROMIUMS:
        if path := shutil.which(name):
            return "chromium", path
    if path := shutil.which("firefox"):
        return "firefox", path
    return None


def _chromium(exe: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="il-chromium-") as profile:
        return subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )


def probe(exe: str, page: Path) -> tuple[dict, str]:
    """Render ``page`` (a copy with PROBE appended) and return what it measured, and the
    browser's console lines (``CONSOLE`` in Chromium's log)."""
    copy = page.with_name(page.stem + ".probe.html")
    copy.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = _chromium(exe, "--dump-dom", copy.as_uri())
    dom = done.stdout
    start = dom.index('<pre id="probe">') + len('<pre id="probe">')
    data = json.loads(_unescape(dom[start:dom.index("</pre>", start)]))
    console = "\n".join(line for line in done.stderr.splitlines() if "CONSOLE" in line)
    return data, console


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def screenshot(kind: str, exe: str, page: Path, png: Path, size: tuple[int, int] = (1200, 1600)) -> Path:
    if kind == "chromium":
        done = _chromium(exe, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", page.as_uri())
    else:
        done = subprocess.run([exe, "--headless", "--screenshot", str(png), f"--window-size={size[0]},{size[1]}",
                               page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    if not png.is_file():
        raise AssertionError(f"{exe} wrote no screenshot: {done.stderr[-2000:]}")
    return png


def png_size(png: Path) -> tuple[int, int]:
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    return struct.unpack(">II", data[16:24])
