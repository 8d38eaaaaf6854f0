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
  or to a file that does not exist in the built site;
- the page loads anything from the network: a ``<script src>`` or ``<link href>`` with an
  http(s) URL, or any request to one (the site must work offline);
- a Python code block has no highlighting (no Pygments token spans in it), or the page's
  highlighted code has no colours (its stylesheet did not load);
- a diagram is left as Mermaid source (``pre.mermaid``, ``code.language-mermaid``, or any code
  block that starts like a Mermaid diagram), or its SVG is wider than the content area or
  drawn so small that its labels are under 10 px.

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

# Both checks' opening lines: the page's content area, and its inner left and right edges.
CONTENT_AREA = r"""
  const container = document.querySelector('div[role="main"]')
    || document.querySelector('.rst-content') || document.body;
  const box = container.getBoundingClientRect();
  const style = getComputedStyle(container);
  const left = box.left + parseFloat(style.paddingLeft) - 1;
  const right = box.right - parseFloat(style.paddingRight) + 1;
""".lstrip("\n")

# Runs in the page; returns the problems it finds as a list of strings.
CHECK_LAYOUT = (
    r"""
(() => {
  const problems = [];
  const notes = [];
"""
    + CONTENT_AREA
    + r"""  // A table box never scrolls or clips, whatever its overflow says.
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
)

# Runs in the page; returns what a reader without a network, or without JavaScript, would miss:
# resources from the network, code left unhighlighted, diagrams left as their source.
CHECK_CONTENT = (
    r"""
(() => {
  const problems = [];
"""
    + CONTENT_AREA
    + r"""  const where = (el) => {
    let heading = null;
    for (let node = el; node && !heading;) {
      if (/^H[1-6]$/.test(node.tagName)) heading = node;
      node = node.previousElementSibling || node.parentElement;
    }
    const title = heading ? heading.textContent.replace(/\s+/g, ' ').replace('\u00b6', '') : '';
    return heading ? ` under "${title.trim()}"` : '';
  };
  const text = (el) => el.textContent.replace(/\s+/g, ' ').trim().slice(0, 50);

  // 1. Nothing from the network: the site is read from disk, perhaps offline.
  for (const el of document.querySelectorAll('script[src], link[href]')) {
    const url = el.getAttribute(el.tagName === 'SCRIPT' ? 'src' : 'href').trim();
    if (/^(https?:)?\/\//i.test(url)) {
      problems.push(`<${el.tagName.toLowerCase()}> loads ${url} from the network`);
    }
  }

  // 2. Python code is highlighted: Pygments token spans in every block, and coloured.
  const codes = new Set();
  for (const el of container.querySelectorAll('.language-python, .language-py')) {
    const code = el.tagName === 'CODE' ? el : el.querySelector('code');
    if (code) codes.add(code);
  }
  let coloured = 0;
  let tokens = 0;
  const blocks = Array.from(codes);
  blocks.forEach((code, index) => {
    const spans = Array.from(code.querySelectorAll('span[class]'))
      .filter((span) => span.className !== 'w');
    if (!spans.length) {
      problems.push(`python code block #${index + 1}${where(code)} ("${text(code)}") is not `
        + 'highlighted: no token spans in it');
      return;
    }
    const base = getComputedStyle(code).color;
    for (const span of spans) {
      if (!/^(k|kn|kc|kd|s|s1|s2|sd|c|c1|mi|nf|nc)$/.test(span.className)) continue;
      tokens += 1;
      if (getComputedStyle(span).color !== base) coloured += 1;
    }
  });
  if (tokens && !coloured) {
    problems.push(`the page's python code has token spans but no colours (${tokens} keywords, `
      + 'strings and names drawn like plain text): is its Pygments stylesheet loaded?');
  }

  // 3. Diagrams are drawn: no Mermaid source left as text, and every SVG fits and is legible.
  const mermaidStart = new RegExp('^(%%.*\\n\\s*)*((flowchart|graph)\\s+(TB|TD|BT|RL|LR)\\b'
    + '|(sequenceDiagram|classDiagram|stateDiagram(-v2)?|erDiagram|gantt|journey|gitGraph'
    + '|mindmap|timeline|quadrantChart|requirementDiagram|xychart-beta|block-beta)\\b'
    + '|pie(\\s+title\\b|\\s*\\n))');
  const sources = new Set([
    ...container.querySelectorAll('pre.mermaid, div.mermaid, code.language-mermaid, '
      + '.language-mermaid'),
  ]);
  for (const el of container.querySelectorAll('pre')) {  // blocks: inline code may name one
    if (mermaidStart.test(el.textContent.trim())) sources.add(el);
  }
  for (const el of sources) {
    if (el.querySelector('svg') || !el.textContent.trim()) continue;
    if (el.tagName === 'CODE' && el.closest('pre') && sources.has(el.closest('pre'))) continue;
    problems.push(`a diagram${where(el)} is shown as its Mermaid source, not drawn `
      + `(<${el.tagName.toLowerCase()} class="${el.className}">: "${text(el)}")`);
  }
  // Icons aside: an SVG of at least 48 px either way, not inside another.
  const svgs = Array.from(container.querySelectorAll('svg')).filter((svg) => {
    const rect = svg.getBoundingClientRect();
    return !svg.parentElement.closest('svg') && (rect.width >= 48 || rect.height >= 48);
  });
  svgs.forEach((svg, index) => {
    const rect = svg.getBoundingClientRect();
    const name = `diagram #${index + 1}${where(svg)}`;
    if (rect.right > right || rect.left < left) {
      problems.push(`${name} is wider than the content area: it spans `
        + `${Math.round(rect.left)}-${Math.round(rect.right)}px, the content area `
        + `${Math.round(left)}-${Math.round(right)}px`);
      return;
    }
    for (let node = svg.parentElement; node && node !== container; node = node.parentElement) {
      if (node.scrollWidth > node.clientWidth + 1
          && ['hidden', 'clip'].includes(getComputedStyle(node).overflowX)) {
        problems.push(`${name} is cut off: overflow-x ${getComputedStyle(node).overflowX} on `
          + `<${node.tagName.toLowerCase()}> hides ${node.scrollWidth - node.clientWidth}px`);
        return;
      }
    }
    const view = svg.viewBox && svg.viewBox.baseVal;
    const scale = view && view.width ? rect.width / view.width : 1;
    const labels = Array.from(svg.querySelectorAll('text, .nodeLabel, .edgeLabel'))
      .filter((label) => label.textContent.trim());
    if (!labels.length) return;
    const sizes = labels.map((label) => parseFloat(getComputedStyle(label).fontSize));
    const smallest = Math.min(...sizes);
    if (smallest * scale < 10) {
      problems.push(`${name} is drawn at ${Math.round(scale * 100)}% of its size: its smallest `
        + `labels are ${(smallest * scale).toFixed(1)}px, under 10px`);
    }
  });
  return {problems, python: blocks.length, diagrams: svgs.length};
})()
"""
)

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

    def take_events(self, method: str, session: str) -> list[dict[str, Any]]:
        """The events of ``method`` for ``session`` received so far, taken off the queue."""
        taken = [e for e in self._events if e["method"] == method and e.get("sessionId") == session]
        self._events = [e for e in self._events if not any(e is t for t in taken)]
        return taken

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
        # The page as a reader without a network sees it: nothing leaves the machine, every
        # run sees the same page, and what asked for the network is reported.
        browser.call("Network.enable", {}, session)
        browser.call("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]}, session)
        navigated = browser.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
        if navigated.get("errorText"):
            return [f"could not open it: {navigated['errorText']}"]
        browser.wait_event("Page.loadEventFired", session)
        browser.evaluate(session, SETTLE)

        layout = browser.evaluate(session, CHECK_LAYOUT)
        content = browser.evaluate(session, CHECK_CONTENT)
        links = browser.evaluate(session, COLLECT_LINKS)
        problems: list[str] = layout["problems"] + content["problems"]
        problems += check_links(site_dir, links)
        # Whatever asked for the network (a stylesheet's font, a script's request), blocked
        # above, is a problem too: offline it would be missing.
        for event in browser.take_events("Network.requestWillBeSent", session):
            url = event["params"]["request"]["url"]
            if urlsplit(url).scheme in ("http", "https"):
                problems.append(f"it requests {url} from the network")
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
            f"  {page.relative_to(site_dir)}: {layout['checked']} tables and code blocks "
            f"({content['python']} in Python), {content['diagrams']} diagrams, {len(links)} links; "
            f"screenshot {picture}",
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
    print(
        f"OK: {len(pages)} pages fit at {WIDTH} px, link to pages, need no network and show "
        f"their code highlighted and diagrams drawn ({elapsed:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
