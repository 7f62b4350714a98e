"""A web page as plain text, fetched through eyas's HttpClient (so it is recorded) and stripped with the stdlib."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from pydantic import BaseModel

from eyas.tools.hosts.http import HttpClient, HttpError

# Elements whose text is never the page's content.
_SKIPPED = {"script", "style", "noscript", "svg", "nav", "footer", "header", "form", "button", "template", "iframe"}
_BLOCKS = {"p", "div", "section", "article", "br", "li", "tr", "pre", "table", "h1", "h2", "h3", "h4", "h5", "h6"}
_HEADERS = {"User-Agent": "eyas-research/0.1", "Accept": "text/html,text/plain,*/*"}


class Page(BaseModel):
    url: str
    status: int
    title: str
    text: str
    error: str | None = None


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skipping = 0
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCKS:
            self._pre += tag == "pre"
            self.parts.append("\n")
            if tag.startswith("h") and len(tag) == 2:
                self.parts.append("#" * int(tag[1]) + " ")
            elif tag == "li":
                self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _BLOCKS:
            self._pre = max(0, self._pre - (tag == "pre"))
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skipping:
            # Outside <pre>, HTML renders any run of whitespace, newlines included, as one space.
            self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text): the readable text of a page, one block per line, runs of blank lines collapsed."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join(parser.title.split()), text


def looks_like_html(body: str) -> bool:
    head = body[:2000].lower()
    return "<html" in head or "<!doctype html" in head or "<body" in head


def fetch_page(http: HttpClient, url: str, *, max_chars: int = 20000, timeout: float = 20.0) -> Page:
    """The page's text, at most `max_chars`; a failure is a Page with `error` set (research goes on)."""
    if not url.startswith(("http://", "https://")):
        return Page(url=url, status=0, title="", text="", error="only http(s) URLs can be fetched")
    try:
        response = http.request("GET", url, headers=_HEADERS, timeout=timeout)
    except HttpError as exc:
        return Page(url=url, status=0, title="", text="", error=str(exc))
    if response.status >= 400 or 300 <= response.status < 400:
        # HttpClient does not follow redirects, so a 3xx is reported rather than read.
        return Page(url=url, status=response.status, title="", text="", error=f"HTTP {response.status}")
    title, text = html_to_text(response.body) if looks_like_html(response.body) else ("", response.body.strip())
    return Page(url=url, status=response.status, title=title, text=text[:max_chars])
