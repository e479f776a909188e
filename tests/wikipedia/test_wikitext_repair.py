"""Markup never closed: tables closed at the end of the page, infoboxes recovered, the rest counted.

Each damaged page is written here; without `wikitext_repair` each table below came out as
nothing at all (mwparserfromhell reads an unclosed `{|` or `{{` as plain text).
"""

from tapas_tf.wikipedia import wikitext_repair
from tapas_tf.wikipedia.dump_reader import Page
from tapas_tf.wikipedia.wikitext_tables import extract_page_tables

URL = "http://en.wikipedia.org/wiki/Rivers"


def _extract(text, title="Rivers"):
    return extract_page_tables(Page(title, 0, 1, 2, None, text))


def _grid(table):
    return [[c.text for c in table.columns]] + [[c.text for c in row.cells] for row in table.rows]


UNCLOSED = """The '''rivers''' of Norway.

== Longest ==
Ordered by length.
{| class="wikitable"
! River !! Length
|-
| Glomma || 621
|-
| Dal || 520

== See also ==
* [[Lakes]]

[[Category:Rivers]]
"""


def test_a_table_never_closed_is_closed_at_the_page_end_as_mediawiki_does():
    (table,), rejected = _extract(UNCLOSED)
    assert rejected == []
    # MediaWiki shows the rest of the page in the last cell; the category link shows nothing.
    assert _grid(table.table) == [["River", "Length"], ["Glomma", "621"], ["Dal", "520 See also\nLakes"]]
    assert table.table.table_id == URL + "_0"
    assert table.repairs == ("autoclosed",)
    assert table.texts == {"TITLE": "Rivers", "DESCRIPTION": "The rivers of Norway.",
                           "SEGMENT_TITLE": "Longest", "SEGMENT_TEXT": "Ordered by length."}


def test_nested_tables_never_closed_are_both_closed_and_a_closed_one_is_not_marked():
    text = ("{| class=\"wikitable\"\n! Team !! Games\n|-\n| Reds ||\n"
            "{| class=\"wikitable\"\n! Half !! Goals\n|-\n| 1st || 2\n|}\n|-\n| Blues || 3\n"
            "{| class=\"wikitable\"\n! Year !! Place\n|-\n| 1990 || 4\n")
    kept, rejected = _extract(text, "Match")
    assert rejected == []
    assert [(_grid(e.table), e.repairs) for e in kept] == [
        ([["Team", "Games"], ["Reds", ""], ["Blues", "3"]], ("autoclosed",)),
        ([["Half", "Goals"], ["1st", "2"]], ()),
        ([["Year", "Place"], ["1990", "4"]], ("autoclosed",))]
    assert wikitext_repair.repair(text).tables_closed == 2


def test_end_template_and_indented_tables_are_read_as_mediawiki_renders_them():
    text = ("Intro.\n:{| class=\"wikitable\"\n! a !! b\n|-\n| 1 || 2\n{{End}}\nBetween.\n"
            "{| class=\"wikitable\"\n! c !! d\n|-\n| 3 || 4\n|}\nAfter.")
    kept, rejected = _extract(text)
    assert rejected == []
    assert [(_grid(e.table), e.repairs) for e in kept] == [([["a", "b"], ["1", "2"]], ()),
                                                           ([["c", "d"], ["3", "4"]], ())]
    # "Between." is text between the tables, not in the first one's last cell.
    assert kept[1].texts["SEGMENT_TEXT"] == "Intro. Between."


def test_table_markup_in_comments_refs_and_nowiki_is_not_closed_or_counted():
    text = ("Text<!-- {| class=\"wikitable\" -->.<ref>{| class=\"wikitable\"\n! a</ref>\n"
            "<nowiki>\n{| class=\"wikitable\"\n</nowiki>\n{{Infobox<!-- never closed: a comment -->}}")
    repaired = wikitext_repair.repair(text)
    assert (repaired.text, repaired.tables_closed, repaired.infoboxes_recovered) == (text, 0, 0)
    assert repaired.written == {"wikitable": 0, "infobox": 1}


RECOVERED = """{{Infobox river
| name   = Glomma
| length = {{convert|621|km}}
| mouth  = [[Skagerrak]]
'''Glomma''' is the longest river of Norway.
{| class="wikitable"
! Town !! People
|-
| Elverum || 21,000
|}
"""


def test_an_infobox_without_its_closing_braces_is_recovered_and_the_page_reads_on():
    kept, rejected = _extract(RECOVERED, "Glomma")
    assert rejected == []
    infobox, table = kept
    assert _grid(infobox.table) == [["name", "length", "mouth"], ["Glomma", "621 km", "Skagerrak"]]
    assert (infobox.kind, infobox.repairs, infobox.table.table_id) == (
        "infobox", ("infobox_recovered",), "http://en.wikipedia.org/wiki/Glomma_infobox0")
    assert _grid(table.table) == [["Town", "People"], ["Elverum", "21,000"]]
    assert table.repairs == ()
    assert table.texts["DESCRIPTION"] == "Glomma is the longest river of Norway."


def test_a_nested_template_that_takes_the_infobox_braces_costs_only_what_it_swallowed():
    text = ("{{Infobox person\n| name = Anna Schmidt\n| spouse = {{marriage|Karl Schmidt|1985\n"
            "| occupation = Writer\n}}\n\n'''Anna Schmidt''' is a writer.")
    (infobox,), rejected = _extract(text, "Anna Schmidt")
    assert rejected == []
    # `occupation` is an argument of {{marriage}} now, as any parser reads it.
    assert _grid(infobox.table) == [["name", "spouse"], ["Anna Schmidt", "Karl Schmidt"]]
    assert infobox.repairs == ("infobox_recovered",)
    assert infobox.texts["DESCRIPTION"] == "Anna Schmidt is a writer."


def test_a_recovered_infobox_that_holds_nothing_is_rejected_and_still_counted_as_recovered():
    _, rejected = _extract("{{Infobox river '''Glomma''' is a river.", "Glomma")
    assert [(r.reason, r.kind, r.repairs) for r in rejected] == [
        ("empty_table", "infobox", ("infobox_recovered",))]


def test_a_table_the_parser_does_not_read_is_counted_as_markup_not_parsed():
    """A wikitable inside an image caption is written in the text but is not a table of the page."""
    text = ("[[File:Map.png|thumb|\n{| class=\"wikitable\"\n! a !! b\n|-\n| 1 || 2\n|}\n]]\n"
            "{| class=\"wikitable\"\n! c !! d\n|-\n| 3 || 4\n|}")
    (kept,), rejected = _extract(text)
    assert kept.table.table_id == URL + "_0"
    assert [(r.reason, r.table_id, r.message) for r in rejected] == [
        ("markup_not_parsed", URL + "_1", URL + "_1: the text opens 2 wikitables, the parser read 1")]


def test_an_upper_case_class_attribute_is_a_wikitable_as_mediawiki_reads_it():
    (kept,), rejected = _extract("{| CLASS=\"sortable wikitable\"\n! a !! b\n|-\n| 1 || 2\n|}")
    assert (_grid(kept.table), rejected) == ([["a", "b"], ["1", "2"]], [])


def test_well_formed_pages_are_not_changed():
    for text in (UNCLOSED.replace("| Dal || 520\n", "| Dal || 520\n|}\n"),
                 RECOVERED.replace("[[Skagerrak]]\n", "[[Skagerrak]]\n}}\n"),
                 "{{Infobox x\n| caption = A long\ncaption on two lines\n}}\nText."):
        repaired = wikitext_repair.repair(text)
        assert (repaired.text, repaired.changed) == (text, False)
