"""Markdown artifacts as HTML that is safe to put in a page: rendered, then sanitised.

Python-Markdown passes raw HTML through, so its output goes through an allowlist: only
harmless tags survive, `<script>`/`<style>`/`<iframe>` lose their content too, every
attribute but `href`/`title`/`alt`/`src` goes, and links keep only http(s), mailto, relative
and `#` targets (no `javascript:`).
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

__all__ = ["render_markdown", "sanitise_html"]

_ALLOWED = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "code",
        "dd",
        "del",
        "div",
        "dl",
        "dt",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "span",
        "strong",
        "sub",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
    ]
)
_DROP_CONTENT = frozenset(["script", "style", "iframe", "object", "embed", "template", "noscript"])
_VOID = frozenset(("br", "hr", "img"))
_ATTRS = {"a": ("href", "title"), "img": ("src", "alt", "title"), "td": (), "th": ()}
_SAFE_SCHEMES = ("http:", "https:", "mailto:")


def render_markdown(text: str) -> str:
    """`text` as sanitised HTML."""
    from headwater.ui._deps import require

    markdown = require("markdown")
    rendered: str = markdown.markdown(text, extensions=["tables", "fenced_code"])
    return sanitise_html(rendered)


def sanitise_html(fragment: str) -> str:
    """`fragment` with only allowlisted tags, attributes and link targets left."""
    cleaner = _Cleaner()
    cleaner.feed(fragment)
    cleaner.close()
    return "".join(cleaner.out)


def _safe_url(url: str) -> bool:
    compact = "".join(url.split()).lower()
    if ":" not in compact.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]:
        return True  # relative, or an anchor
    return compact.startswith(_SAFE_SCHEMES)


class _Cleaner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._dropping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_CONTENT:
            self._dropping += 1
            return
        if self._dropping or tag not in _ALLOWED:
            return
        kept = []
        for name, value in attrs:
            if name in _ATTRS.get(tag, ()) and value is not None:
                if name in ("href", "src") and not _safe_url(value):
                    continue
                kept.append(f' {name}="{html.escape(value, quote=True)}"')
        if tag == "a":
            kept.append(' rel="noopener noreferrer nofollow"')
        self.out.append(f"<{tag}{''.join(kept)}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_CONTENT:
            return
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP_CONTENT:
            self._dropping = max(0, self._dropping - 1)
            return
        if self._dropping or tag not in _ALLOWED or tag in _VOID:
            return
        self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self._dropping:
            self.out.append(html.escape(data, quote=False))
