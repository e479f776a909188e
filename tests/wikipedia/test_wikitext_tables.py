"""Tables, infoboxes and their texts from wikitext, checked cell by cell against hand-read pages."""

import pickle

import pytest

from tapas_tf.wikipedia import wikitext_tables
from tapas_tf.wikipedia.dump_reader import Page, iter_pages
from tapas_tf.wikipedia.pretrain_interactions import to_interaction
from tapas_tf.wikipedia.wikitext_tables import (
    PageParseError,
    extract_page_tables,
    infobox_pairs,
    page_skip_reason,
)
from tests.wikipedia.dump_fixtures import FixturePage, write_dump

URL = "http://en.wikipedia.org/wiki/Best_Dialogue_Award"

AWARD_PAGE = """{{Short description|Award}}
{{Infobox award
| name        = Best Dialogue Award
| image       = Trophy.png
| caption     = The trophy
| country     = [[Pakistan]]
| presenter   = ARY Digital<ref>{{cite web|title=x}}</ref>
| first_award = {{start date|2014|4|16|df=y}}
| website     = {{URL|arydigital.tv}}
| map_size    = 200
| 1           = positional, no label
}}
The '''Best Dialogue Award''' is given for the best [[dialogue|dialogues]] of the year in film.<ref>R.</ref>
It is one of three writing awards.

A second paragraph.

== History ==
Some history.

== Winners ==
Winners are listed by year.

=== 2010s ===
The first ceremony was held in 2014.
{| class="wikitable sortable"
|+ Winners of the ''award''
|-
! Year !! Film !! Dialogue-writer(s)
|-
| rowspan="2" | 2013<br />(1st) || colspan=2 | {{n/a}}
|-
| ''[[Main Hoon Shahid Afridi]]'' || {{sortname|Vasay|Chaudhry}}<ref>Source.</ref>
|}
Text after the table.
{| class="wikitable"
| Not || a header
|-
| 1 || 2
|}
[[Category:Awards]]
"""


def _page(text, title="Best Dialogue Award"):
    return Page(title, 0, 1, 2, None, text)


def _grid(table):
    return [[c.text for c in table.columns]] + [[c.text for c in row.cells] for row in table.rows]


def test_award_page_tables_infobox_texts_and_rejection():
    kept, rejected = extract_page_tables(_page(AWARD_PAGE))
    assert [(e.kind, e.table.table_id) for e in kept] == [("infobox", URL + "_infobox0"),
                                                          ("wikitable", URL + "_0")]
    infobox, table = kept
    assert _grid(infobox.table) == [
        ["name", "country", "presenter", "first award", "website"],
        ["Best Dialogue Award", "Pakistan", "ARY Digital", "16 April 2014", "arydigital.tv"]]
    assert _grid(table.table) == [["Year", "Film", "Dialogue-writer(s)"],
                                  ["2013\n(1st)", "N/A", "N/A"],
                                  ["2013\n(1st)", "Main Hoon Shahid Afridi", "Vasay Chaudhry"]]
    description = ("The Best Dialogue Award is given for the best dialogues of the year in film. "
                   "It is one of three writing awards.")
    assert table.texts == {"TITLE": "Best Dialogue Award", "DESCRIPTION": description,
                           "SEGMENT_TITLE": "2010s", "SEGMENT_TEXT": "The first ceremony was held in 2014.",
                           "CAPTION": "Winners of the award"}
    assert infobox.texts == {"TITLE": "Best Dialogue Award", "DESCRIPTION": description}
    assert table.document_url == URL
    (rejection,) = rejected
    assert (rejection.reason, rejection.table_id, rejection.kind) == ("no_header_row", URL + "_1",
                                                                      "wikitable")


def test_award_page_as_interactions_in_the_released_format():
    interaction = to_interaction(extract_page_tables(_page(AWARD_PAGE))[0][1])
    assert interaction.id == URL + "_0"
    table = interaction.table
    assert (table.document_title, table.document_url, table.caption, table.context_heading) == (
        "Best Dialogue Award", URL, "Winners of the award", "2010s")
    assert [q.id for q in interaction.questions] == ["TITLE", "DESCRIPTION", "SEGMENT_TITLE", "SEGMENT_TEXT",
                                                     "CAPTION"]
    assert interaction.questions[2].original_text == "2010s"


SPANS_PAGE = """{| class=wikitable
! a !! b !! c
|-
| colspan=2px | x || y
|-
| rowspan='2' | p || colspan="junk" | q || r
|-
| s || t
|-
| colspan="2" {{yes}} || z
|-
| colspan=1 colspan=3 | last duplicate wins
|}"""


def test_spans_quoted_unquoted_junk_and_before_a_cell_template():
    (table,), _ = extract_page_tables(_page(SPANS_PAGE))
    assert _grid(table.table) == [["a", "b", "c"], ["x", "x", "y"], ["p", "q", "r"], ["p", "s", "t"],
                                  ["Yes", "Yes", "z"]]
    assert table.stats.caption_rows_dropped == 1  # The full-width last row.


NESTED_PAGE = """== Results ==
Scores by team.
{| class="wikitable"
! Team !! Scores
|-
| Reds ||
{| class="wikitable"
! Half !! Goals
|-
| 1st || 2
|}
|-
| Blues || 3
|}
== Layout ==
{|
|
{| class="wikitable"
|+ Inside a layout table
! k !! v
|-
| 1 || one
|}
|}"""


def test_nested_tables_are_not_in_the_outer_cell_and_count_in_page_order():
    kept, rejected = extract_page_tables(_page(NESTED_PAGE, "Match"))
    assert rejected == []
    assert [e.table.table_id.rsplit("/", 1)[1] for e in kept] == ["Match_0", "Match_1", "Match_2"]
    assert [_grid(e.table) for e in kept] == [[["Team", "Scores"], ["Reds", ""], ["Blues", "3"]],
                                              [["Half", "Goals"], ["1st", "2"]],
                                              [["k", "v"], ["1", "one"]]]
    assert [e.texts.get("SEGMENT_TITLE") for e in kept] == ["Results", "Results", "Layout"]
    assert kept[1].texts["SEGMENT_TEXT"] == "Scores by team."
    assert kept[2].texts["CAPTION"] == "Inside a layout table"


def test_rows_made_by_templates_and_tables_without_a_header_are_rejected_in_order():
    text = ("{| class=\"wikitable\"\n! Party !! Votes\n|-\n{{Election box candidate|party=A|votes=5}}\n|}\n"
            "<table class=\"wikitable\"><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr></table>\n"
            "<table class=\"wikitable\"><caption>HTML</caption><tr><th>a</th><th>b</th></tr>"
            "<tr><td>1</td><td>2</td></tr></table>\n{| class=\"infobox\"\n! not a wikitable\n|}")
    kept, rejected = extract_page_tables(_page(text, "T"))
    assert [(r.reason, r.table_id.rsplit("/", 1)[1]) for r in rejected] == [("template_cells", "T_0"),
                                                                            ("no_header_row", "T_1")]
    (table,) = kept
    assert (table.table.table_id.rsplit("/", 1)[1], _grid(table.table)) == ("T_2", [["a", "b"], ["1", "2"]])
    assert table.texts["CAPTION"] == "HTML"


def test_infobox_generic_labels_and_skipped_parameters():
    text = ("{{Infobox\n| title = Box title\n| image = x.png\n| label1 = Born\n| data1 = 1 May 1960\n"
            "| header2 = Career\n| label3 = Club\n| data3 = {{nowrap|FC {{small|Example}}}}\n"
            "| data4 = no label\n| birth_place = [[Lahore]], Pakistan\n| image_size = 200px\n"
            "| bodystyle = x\n| signature = s.png }}")
    (template,) = wikitext_tables.mwparserfromhell.parse(text).filter_templates(recursive=False)
    assert infobox_pairs(template) == [("birth place", "Lahore, Pakistan"), ("Born", "1 May 1960"),
                                       ("Club", "FC Example")]
    kept, _ = extract_page_tables(_page(text, "Someone"))
    assert kept[0].table.table_id == "http://en.wikipedia.org/wiki/Someone_infobox0"


def test_an_infobox_with_one_filled_field_is_rejected():
    _, rejected = extract_page_tables(_page("{{Infobox person\n| name = X\n| image = y.png\n}}\nX is.", "X"))
    assert [(r.reason, r.kind, r.table_id) for r in rejected] == [
        ("single_column", "infobox", "http://en.wikipedia.org/wiki/X_infobox0")]


def test_section_text_keeps_the_words_nearest_the_table_and_description_is_capped():
    words = " ".join(f"w{i}" for i in range(150))
    text = (f"{words}\n\n==S==\n{words}\n{{| class=\"wikitable\"\n! a !! b\n|-\n| 1 || 2\n|}}\n")
    (table,), _ = extract_page_tables(_page(text))
    assert table.texts["DESCRIPTION"] == " ".join(f"w{i}" for i in range(100))
    assert table.texts["SEGMENT_TEXT"] == " ".join(f"w{i}" for i in range(50, 150))


@pytest.mark.parametrize("page, reason", [
    (Page("A", 0, 1, 2, "B", "#REDIRECT [[B]]"), "redirect"),
    (Page("A", 0, 1, 2, None, "#redirect [[B]]"), "redirect"),
    (Page("Talk:A", 1, 1, 2, None, "text"), "not_article"),
    (Page("A", 0, 1, 2, None, " \n "), "empty_text"),
    (Page("A", 0, 1, 2, None, "text"), None),
])
def test_page_skip_reasons(page, reason):
    assert page_skip_reason(page) == reason


def test_a_parser_failure_is_a_page_parse_error(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("tokenizer exploded")

    monkeypatch.setattr(wikitext_tables.mwparserfromhell, "parse", broken)
    expected = r"'Broken': mwparserfromhell failed: RuntimeError: tokenizer exploded"
    with pytest.raises(PageParseError, match=expected) as error:
        extract_page_tables(_page("{| class=wikitable\n|}", "Broken"))
    assert error.value.reason == "parse_error"
    copy = pickle.loads(pickle.dumps(error.value))
    assert (copy.reason, copy.title, str(copy)) == ("parse_error", "Broken", str(error.value))


def test_three_page_dump_to_interactions(tmp_path):
    path = tmp_path / "pages-articles.xml.bz2"
    write_dump(path, [FixturePage("Best Dialogue Award", AWARD_PAGE, page_id=5),
                      FixturePage("Dialogue award", "#REDIRECT [[Best Dialogue Award]]", page_id=6,
                                  redirect="Best Dialogue Award"),
                      FixturePage("Template:Awards", "{| class=\"wikitable\"\n! a !! b\n|-\n| 1 || 2\n|}",
                                  ns=10, page_id=7)])
    pages = list(iter_pages(str(path)))
    assert [page_skip_reason(page) for page in pages] == [None, "redirect", "not_article"]
    kept, rejected = extract_page_tables(pages[0])
    interactions = [to_interaction(e) for e in kept]
    assert [i.id for i in interactions] == [URL + "_infobox0", URL + "_0"]
    assert interactions[1].table.rows[1].cells[2].text == "Vasay Chaudhry"
    assert [r.table_id for r in rejected] == [URL + "_1"]
