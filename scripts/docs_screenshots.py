"""Build the documentation site, open its pages from disk in headless Chromium, and check them.

Run it from the repository's root::

    .venv/bin/python scripts/docs_screenshots.py            # the home page and Guarantees
    .venv/bin/python scripts/docs_screenshots.py --all      # every page of the site

It builds the site with ``mkdocs build --strict`` (into ``site/``, as ``mkdocs build`` does,
unless ``--site-dir`` says otherwise), opens each page as a file (a ``file://`` URL, the way a
reader who downloaded the site would) in a 1280 px wide window, saves a full-page PNG
screenshot of it (into ``build/docs-screenshots/`` unless ``--out`` says otherwise), and fails,
naming the page and the element, when:

- a table or a code block (``<pre>``) is wider than the page's content area and neither it
  nor a wrapper inside the content area scrolls sideways: it spills over, or is cut off
  (``overflow-x: hidden``);
- a table scrolls sideways although its cells do not wrap (``white-space: nowrap``), or shows
  only its first column with the others scrolled out of sight;
- a link leads to a directory (which a browser opening files shows as a directory listing)
  or to a file that does not exist in the built site.

Chromium (the Debian package ``chromium``, ``/usr/bin/chromium``; ``--chromium`` or
``$CHROMIUM`` for another) is driven over its DevTools protocol through a pipe
(``--remote-debugging-pipe``): no Python package beyond the standard library and MkDocs, and
no network. Every browser gets a fresh profile directory, removed at the end.

Exit status: 0 when every page passes, 1 when a check fails, 2 when the site does not build or
the browser cannot be driven.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGES = ("index.html", "guarantees.html")
WIDTH = 1280
HEIGHT = 900
TIMEOUT = 30.0

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)

# Runs in the page; returns the problems it finds as a list of strings.
CHECK_LAYOUT = r"""
(() => {
  const problems = [];
  const notes = [];
  const container = document.querySelector('div[role="main"]')
    || document.querySelector('.rst-content') || document.body;
  const box = container.getBoundingClientRect();
  const style = getComputedStyle(container);
  const left = box.left + parseFloat(style.paddingLeft) - 1;
  const right = box.right - parseFloat(style.paddingRight) + 1;
  // A table box never scrolls or clips, whatever its overflow says.
  const boxed = (el) => !getComputedStyle(el).display.includes('table');
  const scrolls = (el) => boxed(el) && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const clips = (el) => boxed(el) && ['hidden', 'clip'].includes(getComputedStyle(el).overflowX);

  const describe = (el) => {
    let heading = null;
    for (let node = el; node && !heading;) {
      if (/^H[1-6]$/.test(node.tagName)) heading = node;
      node = node.previousElementSibling || node.parentElement;
    }
    const where = heading ? ` under "${heading.textContent.replace(/\s+/g, ' ').trim()}"` : '';
    let text = (el.tagName === 'TABLE' ? (el.querySelector('th, td') || el) : el).textContent;
    text = text.replace(/\s+/g, ' ').trim().slice(0, 50);
    const all = Array.from(document.querySelectorAll(el.tagName));
    return `<${el.tagName.toLowerCase()}> #${all.indexOf(el) + 1}${where} ("${text}")`;
  };

  // The nearest element from el up to (not including) the container that scrolls or clips.
  const scroller = (el) => {
    for (let node = el; node && node !== container; node = node.parentElement) {
      if (scrolls(node) || clips(node)) return node;
    }
    return null;
  };

  const elements = container.querySelectorAll('table, pre');
  for (const el of elements) {
    if (el.tagName === 'PRE' && el.closest('table')) continue;  // judged with its table
    const name = describe(el);
    const outer = scroller(el);

    // 1. The box the reader sees (its scrolling wrapper, or itself) lies in the content area.
    const rect = (outer || el).getBoundingClientRect();
    if (rect.right > right || rect.left < left) {
      problems.push(`${name} overflows the content area: it spans `
        + `${Math.round(rect.left)}-${Math.round(rect.right)}px, the content area `
        + `${Math.round(left)}-${Math.round(right)}px`);
      continue;
    }

    // 2. What does not fit in its box scrolls: it is neither cut off nor spilling over.
    const boxes = [el, ...el.querySelectorAll('code, div')]
      .filter((node) => getComputedStyle(node).display !== 'inline');
    let broken = false;
    for (const node of boxes) {
      if (node.scrollWidth <= node.clientWidth + 1 || scrolls(node)) continue;
      const hidden = node.scrollWidth - node.clientWidth;
      const above = scroller(node.parentElement);
      const cutter = clips(node) ? node : (above && clips(above) ? above : null);
      if (cutter) {
        problems.push(`${name} is cut off: overflow-x ${getComputedStyle(cutter).overflowX} on `
          + `<${cutter.tagName.toLowerCase()}> hides ${hidden}px of it`);
      } else if (!above) {
        problems.push(`${name} spills ${hidden}px over its box and nothing scrolls `
          + `(overflow-x ${getComputedStyle(node).overflowX})`);
      } else {
        continue;  // a wrapper inside the content area scrolls it
      }
      broken = true;
      break;
    }
    if (broken) continue;

    if (el.tagName !== 'TABLE') continue;
    // A table's cells may reach past the table's own box: measure them.
    const cells = Array.from(el.querySelectorAll('td, th'));
    const reach = Math.max(el.getBoundingClientRect().right,
      ...cells.map((cell) => cell.getBoundingClientRect().right));
    const view = outer ? outer.getBoundingClientRect() : null;
    const viewRight = view ? view.left + outer.clientLeft + outer.clientWidth : right;
    if (reach <= viewRight + 1) continue;  // the whole table is in view
    if (!outer || !scrolls(outer)) {
      problems.push(`${name} is cut off: ${Math.round(reach - viewRight)}px of it lies past `
        + `the ${outer ? 'edge of its wrapper' : 'content area'}, which does not scroll`);
      continue;
    }
    if (view.left + outer.clientLeft + outer.scrollWidth < reach - 1) {
      problems.push(`${name} is cut off: ${Math.round(reach - viewRight)}px of it lies past `
        + `the content area, and its scrolling wrapper reaches only part of it`);
      continue;
    }
    // It scrolls sideways. Fine only when it cannot be narrower (cells kept to one line make
    // it wide) and it still shows more than its first column.
    const row = el.querySelector('tr');
    const columns = row ? Array.from(row.children) : [];
    const shown = columns.filter((cell) => cell.getBoundingClientRect().left < viewRight - 8);
    const unwrapped = cells.find((cell) => {
      const cellStyle = getComputedStyle(cell);
      return ['nowrap', 'pre'].includes(cellStyle.whiteSpace)
        || cellStyle.textWrapMode === 'nowrap';
    });
    if (unwrapped) {
      problems.push(`${name} is wider than the content area and its cells do not wrap `
        + `(white-space ${getComputedStyle(unwrapped).whiteSpace}): ${shown.length} of its `
        + `${columns.length} columns in view`);
    } else if (columns.length > 1 && shown.length < 2) {
      problems.push(`${name} shows only its first column of ${columns.length}; the rest start `
        + `beyond the visible content area`);
    } else {
      notes.push(`${name} scrolls sideways: ${shown.length} of its ${columns.length} columns `
        + `in view`);
    }
  }
  return {problems, notes, checked: elements.length};
})()
"""

# Runs in the page once it has loaded: waits for its fonts, and for the theme's scripts, which
# wrap the tables on jQuery's ready (run from a timer when the page has already loaded).
SETTLE = """
document.fonts.ready
  .then(() => new Promise((done) => setTimeout(done, 250)))
  .then(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))))
  .then(() => true)
"""

# Runs in the page; returns every link as [text, href attribute, resolved URL, where].
COLLECT_LINKS = r"""
Array.from(document.querySelectorAll('a[href]')).map((a) => [
  a.textContent.replace(/\s+/g, ' ').trim().slice(0, 60),
  a.getAttribute('href'),
  a.href,
  a.closest('nav, .wy-nav-side') ? 'navigation' : (a.closest('[role="main"]') ? 'content'
    : 'page'),
])
"""


class BrowserError(RuntimeError):
    """The browser could not be started or answered with an error."""


class Chromium:
    """One headless Chromium, driven over the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, executable: str, profile: Path, log: Path) -> None:
        # Chromium reads commands from its fd 3 and writes replies to its fd 4. The child's
        # ends are first moved above 4, so that placing them there cannot clobber each other.
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        child_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(commands_read)
        os.close(replies_write)

        def place_pipe() -> None:  # in the child, before exec; dup2 leaves 3 and 4 inheritable
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self._log = log.open("wb")
        try:
            self.process = subprocess.Popen(
                [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                preexec_fn=place_pipe,
                close_fds=False,  # fds 3 and 4 must reach it; Python's own fds close on exec
            )
        finally:
            os.close(child_read)
            os.close(child_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._commands, self._replies):
            os.close(fd)
        self._log.close()

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for the browser")
            ready, _, _ = select.select([self._replies], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser exited (status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands, data) :]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message', reply)}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, session: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self._events:
                if event["method"] == method and event.get("sessionId") == session:
                    self._events.remove(event)
                    return event
            event = self._receive(deadline)
            if "method" in event:
                self._events.append(event)

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")


def build_site(site_dir: Path) -> bool:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]
    print("+ " + " ".join(command[1:]), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode == 0


def check_links(site_dir: Path, links: list[list[str]]) -> list[str]:
    problems = []
    site = site_dir.resolve()
    seen = set()
    for text, href, url, where in links:
        parts = urlsplit(url)
        if parts.scheme != "file" or (where, href) in seen:
            continue  # another site, or mailto:, or said already
        seen.add((where, href))
        target = Path(unquote(parts.path))
        name = f"{where} link {text!r} (href {href!r})"
        if target.is_dir():
            problems.append(f"{name} leads to the directory {target}, not a page")
        elif not target.is_file():
            problems.append(f"{name} leads to {target}, which does not exist")
        elif not target.resolve().is_relative_to(site):
            problems.append(f"{name} leads out of the site, to {target}")
    return problems


def check_page(browser: Chromium, page: Path, site_dir: Path, out: Path) -> list[str]:
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"
    ]
    try:
        metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
        browser.call("Emulation.setDeviceMetricsOverride", metrics, session)
        browser.call("Page.enable", {}, session)
        # The page as a reader without a network sees it (the theme asks a CDN for its
        # code highlighter): nothing leaves the machine, and every run sees the same page.
        browser.call("Network.enable", {}, session)
        browser.call("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]}, session)
        navigated = browser.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
        if navigated.get("errorText"):
            return [f"could not open it: {navigated['errorText']}"]
        browser.wait_event("Page.loadEventFired", session)
        browser.evaluate(session, SETTLE)

        layout = browser.evaluate(session, CHECK_LAYOUT)
        links = browser.evaluate(session, COLLECT_LINKS)
        problems: list[str] = layout["problems"] + check_links(site_dir, links)
        for note in layout["notes"]:
            print(f"  {page.relative_to(site_dir)}: {note}")

        # The whole page in one picture: the window made as tall as the page.
        height = browser.evaluate(session, "document.documentElement.scrollHeight")
        browser.call(
            "Emulation.setDeviceMetricsOverride", {**metrics, "height": int(height)}, session
        )
        shot = browser.call("Page.captureScreenshot", {"format": "png"}, session, timeout=60)
        picture = out / (page.relative_to(site_dir).as_posix().replace("/", "_") + ".png")
        picture.write_bytes(base64.b64decode(shot["data"]))
        print(
            f"  {page.relative_to(site_dir)}: {layout['checked']} tables and code blocks, "
            f"{len(links)} links; screenshot {picture}",
            flush=True,
        )
        return problems
    finally:
        with contextlib.suppress(BrowserError, OSError):
            browser.call("Target.closeTarget", {"targetId": target})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help=f"pages of the site (default: {DEFAULT_PAGES})")
    parser.add_argument("--all", action="store_true", help="check every page of the site")
    parser.add_argument("--site-dir", type=Path, default=ROOT / "site")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "docs-screenshots")
    parser.add_argument(
        "--no-build", action="store_true", help="check the site already in --site-dir as it is"
    )
    parser.add_argument(
        "--chromium", default=os.environ.get("CHROMIUM") or shutil.which("chromium") or ""
    )
    args = parser.parse_args()

    if not args.chromium:
        print("chromium not found: install the Debian package chromium, or pass --chromium")
        return 2
    site_dir: Path = args.site_dir.resolve()
    out: Path = args.out.resolve()
    if not args.no_build and not build_site(site_dir):
        print("the site did not build")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if args.all:
        pages = sorted(
            path
            for path in site_dir.rglob("*.html")
            if path.name != "404.html" and path.parent == site_dir
        )
    else:
        pages = [site_dir / name for name in (args.pages or DEFAULT_PAGES)]
    missing = [page for page in pages if not page.is_file()]
    if missing:
        print("no such page in the built site: " + ", ".join(str(page) for page in missing))
        return 2

    started = time.monotonic()
    failures: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="docs-check-chromium-") as profile:
        print(f"+ {args.chromium} (headless, {WIDTH} px wide)", flush=True)
        browser: Chromium | None = None
        try:
            browser = Chromium(args.chromium, Path(profile) / "profile", out / "chromium.log")
            version = browser.call("Browser.getVersion")["product"]
            print(f"  {version}", flush=True)
            for page in pages:
                problems = check_page(browser, page, site_dir, out)
                if problems:
                    failures[str(page.relative_to(site_dir))] = problems
        except (BrowserError, OSError) as exc:
            print(f"the browser failed: {exc} (its log: {out / 'chromium.log'})")
            return 2
        finally:
            if browser is not None:
                browser.close()

    for page_name, problems in failures.items():
        print(f"FAILED {page_name}:")
        for problem in problems:
            print(f"  - {problem}")
    elapsed = time.monotonic() - started
    if failures:
        print(f"{len(failures)} of {len(pages)} pages failed ({elapsed:.1f} s in the browser)")
        return 1
    print(f"OK: {len(pages)} pages fit at {WIDTH} px and link to pages ({elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
