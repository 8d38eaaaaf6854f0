"""MkDocs hook: draw every ```mermaid block of the docs into its page as SVG, at build time.

mkdocs.yml names this file under ``hooks:``. It adds a ``mermaid`` fence to
pymdownx.superfences whose blocks are drawn by ``mermaidx`` (the Mermaid JavaScript library run
in an embedded engine, installed with the ``docs`` extra): the page then holds the diagram as
inline SVG, so the site shows it opened from disk and with no network, and nothing runs in the
reader's browser.

A block Mermaid cannot draw is logged as a warning, which fails ``mkdocs build --strict``, and is
left in the page as its source in ``<pre class="mermaid">``, which scripts/docs_screenshots.py
reports as an unrendered diagram.
"""

from __future__ import annotations

import hashlib
import html
import logging
from typing import Any

log = logging.getLogger("mkdocs.hooks.docs_diagrams")

# Mermaid lays labels out with the metrics of the DejaVu Sans font it is given; naming that
# font first lets the browser paint them with the same widths wherever it is installed.
MERMAID_CONFIG: dict[str, Any] = {
    "theme": "default",
    "themeVariables": {"fontFamily": '"DejaVu Sans", Verdana, Arial, sans-serif'},
    "flowchart": {"htmlLabels": True, "useMaxWidth": True, "wrappingWidth": 280},
}

# Mermaid names every diagram's SVG (and the ids and CSS rules inside it) "my-svg".
MERMAID_ID = "my-svg"

_drawn: dict[str, str] = {}  # source digest -> SVG, for `mkdocs serve`'s rebuilds


def on_config(config: Any) -> Any:
    """Register the ``mermaid`` fence with pymdownx.superfences."""
    superfences = config.mdx_configs.setdefault("pymdownx.superfences", {})
    fences = superfences.setdefault("custom_fences", [])
    if not any(fence.get("name") == "mermaid" for fence in fences):
        fences.append({"name": "mermaid", "class": "diagram", "format": draw})
    return config


def draw(source: str, language: str, class_name: str, options: Any, md: Any, **kwargs: Any) -> str:
    """The fence's HTML: the diagram as inline SVG in a ``<div class="diagram">``."""
    digest = hashlib.blake2s(source.encode("utf-8")).hexdigest()[:12]
    svg = _drawn.get(digest)
    if svg is None:
        try:
            svg = render(source, f"diagram-{digest}")
        except Exception as exc:  # any failure of the renderer is reported, not raised
            first = source.strip().splitlines()[0] if source.strip() else ""
            log.warning("a Mermaid diagram (%r ...) could not be drawn: %s", first, exc)
            return f'<pre class="mermaid"><code>{html.escape(source)}</code></pre>'
        _drawn[digest] = svg
    return f'<div class="{class_name}">{svg}</div>'


def render(source: str, svg_id: str) -> str:
    """The SVG Mermaid draws for ``source``, its element ids prefixed with ``svg_id``."""
    import mermaidx

    svg: str = mermaidx.render(source, config=MERMAID_CONFIG).svg()
    if not svg.lstrip().startswith("<svg") or MERMAID_ID not in svg:
        raise ValueError("the renderer returned no SVG")
    # Unique ids: two diagrams on one page must not share markers or style rules.
    return svg.replace(MERMAID_ID, svg_id)
