"""Small MediaWiki `pages-articles` dumps written by the tests: plain, bz2 and multistream.

A multistream dump is laid out as Wikipedia ships it: one bz2 stream with the `<mediawiki>` header
and `<siteinfo>`, then streams of `pages_per_stream` pages with no root around them, then one
stream with the closing tag; the index lists `offset:page_id:title` for every page.
"""

import bz2
import dataclasses
from typing import List, Optional, Sequence
from xml.sax.saxutils import escape, quoteattr


@dataclasses.dataclass
class FixturePage:
    title: str
    text: str
    ns: int = 0
    page_id: int = 1
    revision_id: int = 100
    redirect: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Wiki:
    """What a dump's header says of its wiki: root `xml:lang`, `<dbname>`, `<base>` (None: left out)."""

    lang: Optional[str] = "en"
    dbname: Optional[str] = "enwiki"
    base: Optional[str] = None


GERMAN = Wiki("de", "dewiki", "https://de.wikipedia.org/wiki/Wikipedia:Hauptseite")


def header(version: str = "0.11", wiki: Wiki = Wiki()) -> str:
    lang = f' xml:lang="{wiki.lang}"' if wiki.lang is not None else ""
    dbname = f"    <dbname>{wiki.dbname}</dbname>\n" if wiki.dbname is not None else ""
    base = f"    <base>{escape(wiki.base)}</base>\n" if wiki.base is not None else ""
    return (f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-{version}/" '
            f'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="{version}"{lang}>\n'
            f"  <siteinfo>\n    <sitename>Wikipedia</sitename>\n{dbname}{base}"
            '    <namespaces>\n      <namespace key="0" case="first-letter" />\n    </namespaces>\n'
            "  </siteinfo>\n")


FOOTER = "</mediawiki>\n"


def page_xml(page: FixturePage) -> str:
    redirect = f"    <redirect title={quoteattr(page.redirect)} />\n" if page.redirect is not None else ""
    return (f"  <page>\n    <title>{escape(page.title)}</title>\n    <ns>{page.ns}</ns>\n"
            f"    <id>{page.page_id}</id>\n{redirect}    <revision>\n      <id>{page.revision_id}</id>\n"
            "      <contributor><username>Tester</username><id>7</id></contributor>\n"
            "      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f'      <text bytes="{len(page.text.encode())}" xml:space="preserve">{escape(page.text)}</text>\n'
            "    </revision>\n  </page>\n")


def dump_xml(pages: Sequence[FixturePage], version: str = "0.11", wiki: Wiki = Wiki()) -> str:
    return header(version, wiki) + "".join(page_xml(page) for page in pages) + FOOTER


def write_dump(path, pages: Sequence[FixturePage], version: str = "0.11", wiki: Wiki = Wiki()) -> None:
    """A dump as `.xml` or, when `path` ends with `.bz2`, as one bz2 stream."""
    data = dump_xml(pages, version, wiki).encode("utf-8")
    with open(path, "wb") as f:
        f.write(bz2.compress(data) if str(path).endswith(".bz2") else data)


def write_multistream(path, index_path, pages: Sequence[FixturePage], pages_per_stream: int = 2,
                      version: str = "0.10", wiki: Wiki = Wiki()) -> List[int]:
    """A multistream dump and its bz2 index; returns the offsets of the page streams."""
    offsets, index_lines = [], []
    with open(path, "wb") as f:
        f.write(bz2.compress(header(version, wiki).encode("utf-8")))
        for first in range(0, len(pages), pages_per_stream):
            group = pages[first:first + pages_per_stream]
            offsets.append(f.tell())
            index_lines.extend(f"{offsets[-1]}:{page.page_id}:{page.title}\n" for page in group)
            f.write(bz2.compress("".join(page_xml(page) for page in group).encode("utf-8")))
        f.write(bz2.compress(FOOTER.encode("utf-8")))
    with open(index_path, "wb") as f:
        f.write(bz2.compress("".join(index_lines).encode("utf-8")))
    return offsets


def numbered_pages(count: int, text: str = "Some text.") -> List[FixturePage]:
    return [FixturePage(f"Page {i}", f"{text} {i}", page_id=i + 1, revision_id=1000 + i)
            for i in range(count)]
