"""Tables of a Wikipedia page's wikitext, with the text around them (paper, section 3).

A page's wikitext is mended where its markup is never closed (`wikitext_repair`: a `{|` closed at
the end of the page, as MediaWiki does; an `{{Infobox` closed after its parameters), parsed with
mwparserfromhell, then:

- every wikitable (a table whose class list holds `wikitable`, in `{| ... |}` or `<table>`
  syntax) is read as rows of cells (`!` cells and `<th>` are header cells; colspan and rowspan
  read leniently: the first integer in the value, else 1; `|+` or `<caption>` is the caption) and
  goes through `table_grid.to_table`. A table nested in a cell is not part of that cell's text;
  if it is a wikitable it is extracted on its own, counted in page order after the table holding
  it (the order of the rendered page, so ids match WikiTableQuestions' `tableIndex`). Tables
  inside `<ref>` are not looked for (the rendered page shows them in the reference list, at the
  end). A table with rows made by templates outside its cells (`{{Election box candidate}}`,
  say) cannot be read from wikitext: it is rejected as `template_cells`. Tables that templates
  produce whole (navboxes, election boxes) are not in the wikitext, so they are neither found
  nor counted: ids match the rendered page's only when no template makes a wikitable.
- every `{{Infobox ...}}` template becomes (label, value) pairs from its named parameters
  (label: the name with underscores as spaces; the generic `{{Infobox}}`'s labelN/dataN are
  paired), leaving out the parameters of `INFOBOX_SKIPPED` (images, captions, maps, styles,
  layout), then `table_grid.infobox_table`.
- the text of each: TITLE, the page title; DESCRIPTION, the first paragraph of the lead section
  (at most `DESCRIPTION_MAX_WORDS` words); SEGMENT_TITLE, the nearest heading above the table
  (any level); SEGMENT_TEXT, the text of that section between the heading and the table (at
  most its last `SEGMENT_TEXT_MAX_WORDS` words, those nearest the table); CAPTION.

Every table found is either an `ExtractedTable` or a `Rejection`, with the repairs its markup
needed (`repairs`). A wikitable or infobox opened in the text (outside comments, `<ref>` and
the like) that the parser still did not read is a Rejection too (`markup_not_parsed`), so that
none vanishes uncounted. Ids and URLs are those of the page's wiki (`Page.wiki_base`).
"""

import re
from typing import Dict, Iterator, List, Optional, Tuple, Union

import mwparserfromhell
from mwparserfromhell.nodes import Heading, Tag, Template, Text
from mwparserfromhell.wikicode import Wikicode

from tapas_tf.wikipedia import wikitext_repair, wikitext_text
from tapas_tf.wikipedia.dump_reader import Page
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
from tapas_tf.wikipedia.table_grid import GridStats, RawCell, TableRejected, infobox_table, to_table

DESCRIPTION_MAX_WORDS = 100
SEGMENT_TEXT_MAX_WORDS = 100
SKIP_REASONS = ("redirect", "not_article", "empty_text")
# Rejections of this module beside table_grid.REASONS.
WIKITEXT_REASONS = ("template_cells", "markup_not_parsed")

# Infobox parameters that hold no fact for a table: media, their captions, maps, layout, wiring.
INFOBOX_SKIPPED = re.compile(
    r"(^|\s)(image\w*|img\w*|logo\w*|map\w*|caption\w*|alt|upright|\w*style|\w*class|signature\w*|pushpin\w*"
    r"|seal\w*|relief|coordinates|coords|\w*size|embed|module\d*|child|subbox|onlysourced|noicon|nocat|qid"
    r"|fetchwikidata|suppressfields|footnotes|header\d*|subheader\d*|above|below|italic title"
    r"|(label|data)style|\w*width|decat|cianame|bgcolou?r|\w*colou?r|\w*url)($|\s)"
    # "title" only as the whole name: "thesis title" or "album title" are facts.
    r"|^title$")
_ATTRIBUTE = re.compile(
    r"\b(colspan|rowspan|style|class|align|valign|bgcolor|width|height|scope|id|nowrap|data-sort-value"
    r"|data-sort-type)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"']+)", re.IGNORECASE)
_ATTRIBUTE_TEXT = re.compile(r"\s*(" + _ATTRIBUTE.pattern + r"\s*)+", re.IGNORECASE)
_NUMBERED = re.compile(r"(label|data)(\d+)")
_REDIRECT = re.compile(r"\s*#redirect\b", re.IGNORECASE)


class PageParseError(ValueError):
    """The wikitext of a page could not be parsed; `reason` is "parse_error"."""

    def __init__(self, title: str, message: str):
        super().__init__(f"{title!r}: {message}")
        self.reason = "parse_error"
        self.title = title
        self.detail = message

    def __reduce__(self):
        # Why: Beam pickles elements; the default reduce would call __init__ with the message only.
        return PageParseError, (self.title, self.detail)


def page_skip_reason(page: Page) -> Optional[str]:
    """Why a page holds no pre-training tables ("redirect", "not_article", "empty_text"), or None."""
    if page.redirect is not None or _REDIRECT.match(page.wikitext):
        return "redirect"
    if page.namespace != 0:
        return "not_article"
    if not page.wikitext.strip():
        return "empty_text"
    return None


def _tag_name(node) -> str:
    return str(node.tag).strip().lower() if isinstance(node, Tag) else ""


def is_wikitable(node) -> bool:
    if _tag_name(node) != "table":
        return False
    # Attribute names are case-insensitive (MediaWiki lowercases them): `CLASS="wikitable"` is one.
    classes = [str(a.value or "") for a in node.attributes if str(a.name).strip().lower() == "class"]
    return bool(classes) and "wikitable" in classes[-1].split()


def is_infobox(node) -> bool:
    return isinstance(node, Template) and wikitext_text.template_name(node).startswith("infobox")


def _span(attributes: Dict[str, str], name: str) -> int:
    """The first integer of a span attribute ("2", "2;", " 2px"), else 1."""
    found = re.search(r"\d+", attributes.get(name, ""))
    return int(found.group()) if found else 1


def _cell_parts(cell: Tag) -> Tuple[Dict[str, str], Optional[Wikicode]]:
    """A cell's attributes (the last of duplicates wins, as in MediaWiki) and its contents.

    `| colspan="5" {{yes}}` has no pipe before its contents until the template, which renders
    `style=... | Yes`, is expanded; so text made only of known cell attributes and followed by a
    template is read as attributes too.
    """
    attributes = {str(a.name).strip().lower(): str(a.value or "") for a in cell.attributes}
    contents = cell.contents
    nodes = contents.nodes if contents is not None else []
    if (not attributes and len(nodes) > 1 and isinstance(nodes[0], Text) and isinstance(nodes[1], Template)
            and _ATTRIBUTE_TEXT.fullmatch(nodes[0].value)):
        attributes = {name.lower(): value.strip("\"'") for name, value in _ATTRIBUTE.findall(nodes[0].value)}
        contents = Wikicode(nodes[1:])
    return attributes, contents


def _makes_cells(node) -> bool:
    """A template outside any cell: its cells exist only after expansion."""
    return isinstance(node, Template)


class _TableReader:
    """The rows, caption and template flag of one table Tag."""

    def __init__(self, table: Tag):
        self.rows: List[List[RawCell]] = []
        self.caption = ""
        self.template_cells = False
        self._implicit: Optional[List[RawCell]] = None  # Cells before the first row mark form a row.
        self._read(table.contents.nodes if table.contents is not None else [])

    def _read(self, nodes) -> None:
        for node in nodes:
            name = _tag_name(node)
            if name in ("thead", "tbody", "tfoot") and node.contents is not None:
                self._read(node.contents.nodes)
            elif name == "tr":
                self._implicit = None
                self._row(node)
            elif name == "caption" or (name == "td" and str(node).lstrip().startswith("|+")):
                # mwparserfromhell 0.7 reads `|+` as a table-level cell whose text starts with "+".
                self.caption = wikitext_text.cell_text(node.contents).lstrip("+").strip()
            elif name in ("td", "th"):
                if self._implicit is None:
                    self._implicit = []
                    self.rows.append(self._implicit)
                self._implicit.append(self._cell(node))
            elif _makes_cells(node):
                self.template_cells = True

    def _row(self, row: Tag) -> None:
        cells = []
        for node in row.contents.nodes if row.contents is not None else []:
            if _tag_name(node) in ("td", "th"):
                cells.append(self._cell(node))
            elif _makes_cells(node):
                self.template_cells = True
        if cells:
            self.rows.append(cells)

    @staticmethod
    def _cell(cell: Tag) -> RawCell:
        attributes, contents = _cell_parts(cell)
        return RawCell(wikitext_text.cell_text(contents), _tag_name(cell) == "th",
                       _span(attributes, "colspan"), _span(attributes, "rowspan"))


def infobox_pairs(template: Template) -> List[Tuple[str, str]]:
    """(label, value) of an infobox's named parameters, in order, without `INFOBOX_SKIPPED` ones."""
    pairs, numbered = [], {}
    for param in template.params:
        label = re.sub(r"\s+", " ", str(param.name).replace("_", " ")).strip()
        key = label.lower()
        if not param.showkey or key.isdigit():
            continue  # A positional argument (`|x` or `|1=x`) has no label.
        found = _NUMBERED.fullmatch(key)
        if found:
            slot = numbered.setdefault(int(found.group(2)), {})
            slot[found.group(1)] = wikitext_text.cell_text(param.value)
        elif not INFOBOX_SKIPPED.search(key):
            pairs.append((label, wikitext_text.cell_text(param.value)))
    for number in sorted(numbered):
        if "label" in numbered[number] and "data" in numbered[number]:
            pairs.append((numbered[number]["label"], numbered[number]["data"]))
    return pairs


class _Context:
    """Section titles and texts of a page's top-level nodes, rendered once each."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.heading: List[Optional[int]] = []
        last = None
        for index, node in enumerate(nodes):
            if isinstance(node, Heading):
                last = index
            self.heading.append(last)
        self._raw: Dict[int, str] = {}
        self._description: Optional[str] = None

    def raw(self, index: int) -> str:
        if index not in self._raw:
            self._raw[index] = wikitext_text.render(Wikicode([self.nodes[index]]))
        return self._raw[index]

    def description(self) -> str:
        """The first paragraph of the lead section (rendered on first use: most pages have no table)."""
        if self._description is None:
            headings = (i for i, node in enumerate(self.nodes) if isinstance(node, Heading))
            lead = "".join(self.raw(i) for i in range(next(headings, len(self.nodes))))
            first = next(iter(wikitext_text.paragraphs(lead)), "")
            self._description = " ".join(first.split()[:DESCRIPTION_MAX_WORDS])
        return self._description

    def segment(self, index: int) -> Tuple[str, str]:
        """(section title, section text before node `index`)."""
        heading = self.heading[index]
        title = wikitext_text.prose(self.raw(heading)) if heading is not None else ""
        first = heading + 1 if heading is not None else 0
        words = wikitext_text.prose("".join(self.raw(i) for i in range(first, index))).split()
        return title, " ".join(words[-SEGMENT_TEXT_MAX_WORDS:])


def _found_in(node) -> Iterator[Union[Tag, Template]]:
    """The wikitables and infoboxes in a node (itself included), in page order.

    Only tag contents and template arguments can hold them. A `<ref>` is not walked: what it holds
    is rendered in the list of references, not in place, so it would shift the ids of the tables
    after it.
    """
    if is_wikitable(node) or is_infobox(node):
        yield node
    if isinstance(node, Tag) and node.contents is not None and _tag_name(node) != "ref":
        for child in node.contents.nodes:
            yield from _found_in(child)
    elif isinstance(node, Template):
        for param in node.params:
            for child in param.value.nodes:
                yield from _found_in(child)


def _parse(page: Page) -> Tuple[Wikicode, wikitext_repair.Repaired]:
    """The page's wikitext, mended (`wikitext_repair`), parsed."""
    try:
        repaired = wikitext_repair.repair(page.wikitext)
        # skip_style_tags: see wikitext_text (quotes are taken out of the text there).
        return mwparserfromhell.parse(repaired.text, skip_style_tags=True), repaired
    except Exception as e:  # noqa: BLE001 -- any parser failure costs the page, which the job counts.
        raise PageParseError(page.title, f"mwparserfromhell failed: {type(e).__name__}: {e}") from None


def extract_page_tables(page: Page, base: Optional[str] = None
                        ) -> Tuple[List[ExtractedTable], List[Rejection]]:
    """The wikitables and infoboxes of a page: kept ones with their texts, and rejected ones.

    Ids and URLs start with `base`, by default the page's wiki's (`Page.wiki_base`). The caller
    skips pages with a `page_skip_reason` first. Raises PageParseError when the parser fails or
    the markup nests too deeply to walk.
    """
    code, repaired = _parse(page)
    try:
        return _extract(page, code, base or page.wiki_base, repaired)
    except RecursionError:
        raise PageParseError(page.title, "the markup nests too deeply") from None


def _extract(page: Page, code: Wikicode, base: str, repaired: wikitext_repair.Repaired
             ) -> Tuple[List[ExtractedTable], List[Rejection]]:
    context = _Context(code.nodes)
    url = page_url(page.title, base)
    kept, rejected = [], []
    counts = {"wikitable": 0, "infobox": 0}
    for index, node in enumerate(code.nodes):
        if isinstance(node, (Text, Heading)):
            continue
        for found in _found_in(node):
            kind = "wikitable" if isinstance(found, Tag) else "infobox"
            tid = table_id(page.title, counts[kind], kind, base)
            counts[kind] += 1
            segment_title, segment_text = context.segment(index)
            texts = {TITLE: page.title, DESCRIPTION: context.description(), SEGMENT_TITLE: segment_title,
                     SEGMENT_TEXT: segment_text}
            # Why only then: str() of a node copies its whole source.
            repairs = wikitext_repair.repairs_of(found) if repaired.changed else ()
            stats = GridStats()
            try:
                if kind == "infobox":
                    table = infobox_table(infobox_pairs(found), tid)
                else:
                    table, texts[CAPTION] = _wikitable(found, tid, stats)
            except TableRejected as e:
                rejected.append(Rejection(e.reason, tid, str(e), kind, repairs))
                continue
            kept.append(ExtractedTable(table, texts, kind, stats, url, repairs))
    rejected.extend(_not_parsed(page.title, base, repaired.written, counts))
    return kept, rejected


def _not_parsed(title: str, base: str, written: Dict[str, int], counts: Dict[str, int]) -> List[Rejection]:
    """A Rejection ("markup_not_parsed") for each wikitable or infobox written in the text that the
    parser did not read as one: without it, such a table would vanish uncounted. Their ids follow
    the page's read ones (where they were on the page is unknown)."""
    lost = []
    for kind, count in written.items():
        for index in range(counts[kind], count):
            tid = table_id(title, index, kind, base)
            lost.append(Rejection("markup_not_parsed", tid, f"{tid}: the text opens {count} {kind}s, the "
                                  f"parser read {counts[kind]}", kind))
    return lost


def _wikitable(node: Tag, tid: str, stats: GridStats):
    reader = _TableReader(node)
    if reader.template_cells:
        raise TableRejected("template_cells", f"{tid}: rows or cells made by templates outside the cells")
    return to_table(reader.rows, tid, stats), reader.caption
