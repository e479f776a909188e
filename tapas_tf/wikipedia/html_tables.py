"""Tables and the text around them, from rendered Wikipedia article HTML (paper, section 3).

Input is an `HtmlPage` (`read_page`, from `html_pages`: an article body as MediaWiki's
`action=render` gives it, e.g. the WikiTableQuestions crawl's `2xx-page/N.html.gz` and `N.json`).
`extract_html` returns every table of interest on it, each either an `ExtractedTable` (here an
`HtmlExtractedTable`, which adds `aliases`) or a `Rejection` with a reason from
`REJECTION_REASONS` (both from `pretrain_interactions`, shared with the wikitext side):

- **wikitables**: every `table` with the class `wikitable`, in document order (nested ones too),
  counted from 0 as WikiTableQuestions counts them, so that wikitable `k` of page `2xx-page/N` is
  WTQ's table `csv/2xx-csv/N.csv` when `k` is the page's `tableIndex` (recorded in `aliases`). Its
  rows become `RawCell`s (`th` header, `td` data, spans read leniently) and `table_grid.to_table`
  applies the shared rules.
- **infoboxes**: tables with a class in `INFOBOX_CLASSES`. Rows of a label (`th`, or `td` in
  older templates) and one `td` value become (label, value) pairs for `table_grid.infobox_table`;
  other rows (a full-width title, an image, a section header inside the box) are skipped.
- A table that is both (album review boxes: `class="wikitable infobox"`) is extracted as the
  infobox, its layout; its wikitable slot is a `Rejection` with the reason
  `extracted_as_infobox`, so that both tallies add up and the wikitable count stays WTQ's.

Other tables (navboxes, message boxes, layout tables) are neither extracted nor rejected. Cell
text follows `html_text` (citation marks, sort keys and hidden elements left out, `<br>` kept as
a newline, nested tables left to themselves).

Texts (`ExtractedTable.texts`): TITLE is the page title; DESCRIPTION the first non-empty
paragraph of the lead (before the first section heading); SEGMENT_TITLE the nearest h2/h3/h4
heading above the table; SEGMENT_TEXT the paragraphs between that heading and the table, cut to
the first `MAX_SEGMENT_WORDS` words (the opening of a section says what it is about); CAPTION the
table's `<caption>`. A table in the lead has no segment: the lead is the description. Headings and
paragraphs count as prose outside the table of contents and outside any table other than a layout
table (`multicol` or class-less: multi-column layouts hold headings and paragraphs), so a
paragraph inside a cell is not section text.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple, Union

import lxml.html

from tapas_tf.wikipedia import html_text
from tapas_tf.wikipedia.html_pages import HtmlPage, PageError, parse_page, read_page  # noqa: F401 (API)
from tapas_tf.wikipedia.pretrain_interactions import (
    CAPTION,
    DESCRIPTION,
    SEGMENT_TEXT,
    SEGMENT_TITLE,
    TITLE,
    ExtractedTable,
    Rejection,
    page_url,
    table_id,
)
from tapas_tf.wikipedia.table_grid import REASONS, GridStats, RawCell, TableRejected, infobox_table, to_table
from tapas_tf.wikipedia.wiki_urls import WIKI_BASE, base_from_url

WIKITABLE_CLASS = "wikitable"
# `infobox` is the class of every English infobox template (all 1,651 of the WTQ crawl); the `_v2`
# and `_v3` variants are the infobox classes of other wikis' templates (French Wikipedia).
INFOBOX_CLASSES = frozenset({"infobox", "infobox_v2", "infobox_v3"})
# Tables that only arrange content in columns; their headings and paragraphs are article prose.
LAYOUT_CLASSES = frozenset({"multicol"})
SECTION_HEADINGS = ("h2", "h3", "h4")
MAX_SEGMENT_WORDS = 100

# Reasons of a Rejection: the shared grid rules', and a wikitable slot taken by an infobox.
REJECTION_REASONS = REASONS + ("extracted_as_infobox",)


@dataclasses.dataclass
class HtmlExtractedTable(ExtractedTable):
    """An `ExtractedTable` with `aliases`: other names of the same table, e.g. the WTQ table it is
    (`csv/203-csv/113.csv`), for excluding evaluation tables from pre-training."""

    aliases: Tuple[str, ...] = ()


def wtq_alias(page: HtmlPage, index: int) -> Tuple[str, ...]:
    """(`csv/203-csv/113.csv`,) for wikitable `tableIndex` of page `203-page/113`, else ()."""
    folder, stem = page.source_key.split("/", 1)
    if page.wtq_table_index != index or not folder.endswith("-page"):
        return ()
    return (f"csv/{folder[: -len('-page')]}-csv/{stem}.csv",)


def _span(value: Optional[str]) -> int:
    """A span attribute as browsers read it: leading digits ("2", " 3px" -> 2, 3); junk -> 1."""
    digits = ""
    for char in (value or "").strip():
        if char not in "0123456789":
            break
        digits += char
    return int(digits) if digits and int(digits) > 0 else 1


def _rows(table) -> List:
    """The table's own rows (`tr` children, or inside `thead`/`tbody`/`tfoot`), not nested ones."""
    rows = []
    for child in table:
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(row for row in child if row.tag == "tr")
    return rows


def _cells(row) -> List:
    return [cell for cell in row if cell.tag in ("th", "td")]


def raw_rows(table) -> List[List[RawCell]]:
    """The rows of a table element as RawCells."""
    return [[RawCell(html_text.cell_text(cell), cell.tag == "th", _span(cell.get("colspan")),
                     _span(cell.get("rowspan"))) for cell in _cells(row)] for row in _rows(table)]


def infobox_pairs(table) -> List[Tuple[str, str]]:
    """(label, value) of the rows made of a label cell and a `td` value; other rows are skipped.

    The label is a `th`, or a `td` in the older templates that still render labels as data cells
    (`<td>Maker:</td><td>Eastman Kodak</td>`; reading them keeps 134 more of the WTQ crawl's 1,651
    infoboxes); a colon closing a label is dropped. Rows of one cell (a title, an image, a section
    header inside the box) or of three or more (a small grid inside the box) are not pairs.
    """
    pairs = []
    for row in _rows(table):
        cells = _cells(row)
        if len(cells) == 2 and cells[1].tag == "td":
            label = html_text.plain_text(cells[0]).removesuffix(":").rstrip()
            pairs.append((label, html_text.cell_text(cells[1])))
    return pairs


def _caption(table) -> str:
    return next((html_text.plain_text(child) for child in table if child.tag == "caption"), "")


def _is_prose(element) -> bool:
    """A heading or paragraph of the article, not of the contents box or a (non-layout) table."""
    for ancestor in element.iterancestors():
        if ancestor.get("id") == "toc":
            return False
        if ancestor.tag == "table":
            names = html_text.classes(ancestor)
            if names and not names & LAYOUT_CLASSES:
                return False
    return True


@dataclasses.dataclass
class _Context:
    """The text around the tables, updated while the page is read in document order."""

    title: str
    description: str = ""
    heading: Optional[str] = None  # None: still in the lead.
    paragraphs: List[str] = dataclasses.field(default_factory=list)

    def read(self, element) -> None:
        """Takes in a heading (a new section starts) or a paragraph of the current section."""
        if element.tag == "p":
            self.paragraphs.append(html_text.plain_text(element))
        else:
            self.heading, self.paragraphs = html_text.plain_text(element), []

    def texts(self, caption: str) -> Dict[str, str]:
        """The snippets of a table met now; empty ones are dropped by `ExtractedTable`."""
        texts = {TITLE: self.title, DESCRIPTION: self.description, CAPTION: caption}
        if self.heading is not None:
            texts[SEGMENT_TITLE] = self.heading
            texts[SEGMENT_TEXT] = " ".join(" ".join(self.paragraphs).split()[:MAX_SEGMENT_WORDS])
        return texts


def parse_html(html: str):
    """The element tree of an article body (a `div` holding it); None for an empty page."""
    if not html.strip():
        return None
    return lxml.html.fragment_fromstring(html, create_parent="div")


def _description(root) -> str:
    """The first non-empty paragraph before the first section heading."""
    for element in root.iter("p", *SECTION_HEADINGS):
        if not _is_prose(element):
            continue
        if element.tag != "p":
            return ""
        text = html_text.plain_text(element)
        if text:
            return text
    return ""


Outcome = Union[HtmlExtractedTable, Rejection]


def _extract_one(table, kind: str, index: int, context: _Context, page: HtmlPage,
                 aliases: Tuple[str, ...]) -> Outcome:
    """The table's HtmlExtractedTable, or a Rejection with the grid rules' reason."""
    base = page_base(page)
    identifier = table_id(page.title, index, kind, base)
    stats = GridStats()
    try:
        if kind == "infobox":
            proto = infobox_table(infobox_pairs(table), identifier)
        else:
            proto = to_table(raw_rows(table), identifier, stats)
    except TableRejected as error:
        return Rejection(error.reason, identifier, str(error), kind)
    return HtmlExtractedTable(proto, context.texts(_caption(table)), kind, stats,
                              document_url=page.url or page_url(page.title, base), aliases=aliases)


def page_base(page: HtmlPage) -> str:
    """The article base of the page's wiki, from its crawl URL (`http://de.wikipedia.org/wiki?...`
    -> `http://de.wikipedia.org/wiki/`); English Wikipedia's without one."""
    return (base_from_url(page.url) if page.url else None) or WIKI_BASE


def extract_html(page: HtmlPage) -> Tuple[List[ExtractedTable], List[Rejection]]:
    """Every wikitable and infobox of a page, extracted or rejected, in document order.

    Ids (`pretrain_interactions.table_id`): `http://en.wikipedia.org/wiki/{Title}_{k}` (the wiki
    of the page's URL, `page_base`) for wikitable k, `..._infobox{j}` for infobox j, both counted
    from 0 in document order. The extracted tables are `HtmlExtractedTable`s: `aliases` names the
    WTQ table a wikitable is.
    """
    root = parse_html(page.html)
    if root is None:
        return [], []
    context = _Context(page.title, _description(root))
    outcomes: List[Outcome] = []
    wikitables = infoboxes = 0
    for element in root.iter("table", "p", *SECTION_HEADINGS):
        if element.tag != "table":
            if _is_prose(element):
                context.read(element)
            continue
        names = html_text.classes(element)
        is_wikitable, is_infobox = WIKITABLE_CLASS in names, bool(names & INFOBOX_CLASSES)
        aliases: Tuple[str, ...] = wtq_alias(page, wikitables) if is_wikitable else ()
        if is_wikitable and is_infobox:
            identifier = table_id(page.title, wikitables, base=page_base(page))
            infobox_id = table_id(page.title, infoboxes, "infobox", page_base(page))
            message = f"{identifier}: extracted as {infobox_id}"
            outcomes.append(Rejection("extracted_as_infobox", identifier, message, "wikitable"))
        elif is_wikitable:
            outcomes.append(_extract_one(element, "wikitable", wikitables, context, page, aliases))
        if is_infobox:
            outcomes.append(_extract_one(element, "infobox", infoboxes, context, page, aliases))
        wikitables += is_wikitable
        infoboxes += is_infobox
    return ([item for item in outcomes if not isinstance(item, Rejection)],
            [item for item in outcomes if isinstance(item, Rejection)])
