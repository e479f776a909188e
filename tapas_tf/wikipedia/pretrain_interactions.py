"""An extracted table and its text snippets as an Interaction, in the format of Google's corpus.

Google's released pre-training corpus (TAPAS, `PRETRAIN_DATA.md`) stores each Wikipedia table as an
Interaction whose `table` holds the cells and whose `questions` hold the text around the table,
one snippet each, with the snippet's kind as its id:

    id: "http://en.wikipedia.org/wiki/ARY_Film_Award_for_Best_Dialogue_1"
    table { columns { text: "Year" } ... table_id: "http://en.wikipedia.org/wiki/ARY_Fi..._Dialogue_1" }
    questions { id: "TITLE" original_text: "ARY Film Award for Best Dialogue" }
    questions { id: "DESCRIPTION" original_text: "The ARY Film Award for Best Dialogue is ..." }
    questions { id: "SEGMENT_TITLE" original_text: "2010s" }

Both extractors (wikitext and rendered HTML) return `ExtractedTable`s and `Rejection`s, and
`to_interaction` is the one place that writes this format.
"""

import dataclasses
from typing import Dict, Tuple

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.wikipedia.table_grid import GridStats
from tapas_tf.wikipedia.wiki_urls import WIKI_BASE

TITLE = "TITLE"
DESCRIPTION = "DESCRIPTION"
SEGMENT_TITLE = "SEGMENT_TITLE"
SEGMENT_TEXT = "SEGMENT_TEXT"
CAPTION = "CAPTION"
# The order of the snippets in an Interaction's questions.
TEXT_KEYS = (TITLE, DESCRIPTION, SEGMENT_TITLE, SEGMENT_TEXT, CAPTION)
KINDS = ("wikitable", "infobox")
# Markup mended before a table could be read (`ExtractedTable.repairs`, `Rejection.repairs`); the
# job counts each as `tables_<repair>`: "autoclosed", a wikitable never closed, closed at the end
# of the page as MediaWiki does; "infobox_recovered", an infobox template never closed, closed
# after its last parameter line (MediaWiki shows such a template as raw text).
REPAIRS = ("autoclosed", "infobox_recovered")


def page_url(title: str, base: str = WIKI_BASE) -> str:
    """`Foo bar` -> `http://en.wikipedia.org/wiki/Foo_bar` (the released corpus's form); `base` is
    the wiki's article base (`wiki_urls.site_base`), `http://de.wikipedia.org/wiki/` for dewiki."""
    return base + title.strip().replace(" ", "_")


def table_id(title: str, index: int, kind: str = "wikitable", base: str = WIKI_BASE) -> str:
    """The id of the `index`-th (from 0) table of a kind on a page, as the released corpus names it.

    Wikitables: `{url}_{index}`, counted over every wikitable of the page in page order, whether
    it was kept or not (so that WikiTableQuestions' `tableIndex` of the page matches); infoboxes:
    `{url}_infobox{index}`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return f"{page_url(title, base)}_{'infobox' if kind == 'infobox' else ''}{index}"


@dataclasses.dataclass
class ExtractedTable:
    """A table kept for pre-training, with the text around it.

    Attributes:
      table: the cells (columns = header row) and `table_id`; `to_interaction` adds the rest.
      texts: snippets by key (`TEXT_KEYS`); empty snippets are dropped on construction.
      kind: "wikitable" or "infobox".
      stats: limits applied while building the table (spans clipped, title or caption rows dropped).
      document_url: the page's URL (`page_url(title)` for dumps; the crawl's URL for rendered pages).
      repairs: the `REPAIRS` applied to the markup before the table could be read.
    """

    table: interaction_pb2.Table
    texts: Dict[str, str]
    kind: str
    stats: GridStats = dataclasses.field(default_factory=GridStats)
    document_url: str = ""
    repairs: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        unknown = set(self.texts) - set(TEXT_KEYS)
        if unknown:
            raise ValueError(f"unknown text keys {sorted(unknown)}; use {TEXT_KEYS}")
        self.texts = {key: self.texts[key] for key in TEXT_KEYS if self.texts.get(key, "").strip()}


@dataclasses.dataclass(frozen=True)
class Rejection:
    """A table that was found but not kept: `reason` (a `table_grid.REASONS` entry or an
    extractor's own, e.g. "template_cells"), the id it would have had, why, and the `REPAIRS`
    applied to its markup."""

    reason: str
    table_id: str
    message: str
    kind: str = "wikitable"
    repairs: Tuple[str, ...] = ()


def to_interaction(extracted: ExtractedTable) -> interaction_pb2.Interaction:
    """The Interaction of an extracted table: its id is the table id, its questions the snippets.

    The table gets `document_title` (the TITLE snippet), `document_url`, `caption` (the CAPTION
    snippet) and `context_heading` (the SEGMENT_TITLE snippet). `extracted.table` is not changed.
    """
    interaction = interaction_pb2.Interaction(id=extracted.table.table_id)
    table = interaction.table
    table.CopyFrom(extracted.table)
    texts = extracted.texts
    for field, key in (("document_title", TITLE), ("caption", CAPTION), ("context_heading", SEGMENT_TITLE)):
        if key in texts:
            setattr(table, field, texts[key])
    if extracted.document_url:
        table.document_url = extracted.document_url
    for key in TEXT_KEYS:
        if key in texts:
            interaction.questions.add(id=key, original_text=texts[key])
    return interaction
