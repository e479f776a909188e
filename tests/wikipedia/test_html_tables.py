"""Tables and their texts from rendered Wikipedia HTML, on small pages the tests write.

The page below is shaped like the WikiTableQuestions crawl (`action=render` body, crawl comment
first); its tables, drawn as extracted:

    wikitable 0 (lead)          | Year        | Film   | Writer |      rowspan and colspan
                                | 2013\\n(1st)| (none) | (none) |
                                | 2013\\n(1st)| Shahid | Vasay  |
    infobox 0                   | Born | Occupation | Maker |        th/td and td/td rows
                                | 1 May 1960\\nLondon | Writer | Kodak |
    wikitable 1 ("Results")     | Rank | Nation |                   caption, sort keys, references
                                | 1    | Soviet Union (URS) |
    wikitable 2 (nested in a    | Inner | Value |                   a table of its own, counted
      cell of 1)                | a     | 1     |                   after 1 in document order
    wikitable 3                 no header row -> rejected
"""

import gzip
import json

import pytest

from tapas_tf.wikipedia import html_tables
from tapas_tf.wikipedia.html_pages import PageError, parse_page, read_page
from tapas_tf.wikipedia.pretrain_interactions import to_interaction

URL = "http://en.wikipedia.org/wiki/"
COMMENT = ("<!-- http%3A//en.wikipedia.org/wiki%3Faction%3Drender%26curid%3D42%26oldid%3D777 "
           "2014-06-13-02-28-12 -->\n")
PAGE = COMMENT + """<div class="dablink">For the film, see elsewhere.</div>
<p></p>
<p>The <b>Test Page</b> is a page<sup class="reference"><a href="#c1">[1]</a></sup> about
   tables.</p>
<p>A second lead paragraph.</p>
<table class="wikitable">
<tr><th>Year</th><th>Film</th><th>Writer</th></tr>
<tr><td rowspan="2px">2013<br />(1st)</td><td colspan=" 2 ">(none)</td></tr>
<tr><td colspan="junk">Shahid</td><td>Vasay</td></tr>
</table>
<div id="toc" class="toc"><div id="toctitle"><h2>Contents</h2></div><p>not prose</p></div>
<table class="infobox vcard">
<tr><th colspan="2">Test Person</th></tr>
<tr><td colspan="2"><img src="x.png" alt="A photo" /></td></tr>
<tr><th scope="row">Born</th><td>1 May 1960<br />London</td></tr>
<tr><th>Spouse</th><td></td></tr>
<tr><th>Occupation</th><td>Writer<sup class="noprint Inline-Template">[citation needed]</sup></td></tr>
<tr><td>Maker:</td><td>Kodak</td></tr>
<tr><td>a</td><td>b</td><td>c</td></tr>
</table>
<h2><span class="mw-headline" id="Results">Results</span><span class="mw-editsection">[edit]</span></h2>
<p>First paragraph of the section.</p>
<table class="toccolours"><tr><td><p>Not section text.</p></td></tr></table>
<p>Second   paragraph,
   on two source lines.</p>
<table class="wikitable sortable">
<caption>Medal <i>table</i><sup class="reference">[2]</sup></caption>
<tr><th>Rank</th><th>Nation<style>.x{color:red}</style></th></tr>
<tr><td><span class="sortkey">01</span>1</td>
<td><span style="display: none">URS</span>Soviet Union (URS)<sup class="reference">[3]</sup>
<script>var x;</script></td></tr>
<tr><td><p>In a cell.</p></td>
<td>Outer text<table class="wikitable"><tr><th>Inner</th><th>Value</th></tr>
<tr><td>a</td><td>1</td></tr></table></td></tr>
</table>
<h3><span class="mw-headline">Other</span></h3>
<table class="wikitable"><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr></table>
<table class="navbox"><tr><th>Navigation</th><th>box</th></tr><tr><td>x</td><td>y</td></tr></table>
"""


def _texts(table):
    return [[c.text for c in table.columns]] + [[c.text for c in row.cells] for row in table.rows]


def _page(html=PAGE, table_index=None, key="203-page/7"):
    return html_tables.HtmlPage(title="Test Page", url="http://crawl/url", page_id=42, revision=777,
                                html=html, source_key=key, wtq_table_index=table_index)


@pytest.fixture(scope="module")
def extracted():
    tables, rejections = html_tables.extract_html(_page(table_index=1))
    return {t.table.table_id[len(URL):]: t for t in tables}, rejections


def test_every_wikitable_and_infobox_is_extracted_or_rejected_in_page_order(extracted):
    tables, rejections = extracted
    assert list(tables) == ["Test_Page_0", "Test_Page_infobox0", "Test_Page_1", "Test_Page_2"]
    assert [(r.table_id, r.kind, r.reason) for r in rejections] == [
        (URL + "Test_Page_3", "wikitable", "no_header_row")]


def test_colspan_rowspan_and_br_in_cells(extracted):
    """Spans are read leniently ("2px" -> 2, " 2 " -> 2, "junk" -> 1); `<br>` is a newline."""
    assert _texts(extracted[0]["Test_Page_0"].table) == [["Year", "Film", "Writer"],
                                                         ["2013\n(1st)", "(none)", "(none)"],
                                                         ["2013\n(1st)", "Shahid", "Vasay"]]


def test_references_sort_keys_hidden_elements_style_and_script_are_left_out(extracted):
    assert _texts(extracted[0]["Test_Page_1"].table) == [["Rank", "Nation"],
                                                         ["1", "Soviet Union (URS)"],
                                                         ["In a cell.", "Outer text"]]


def test_a_nested_table_is_not_cell_text_but_a_table_of_its_own(extracted):
    assert _texts(extracted[0]["Test_Page_2"].table) == [["Inner", "Value"], ["a", "1"]]


def test_infobox_pairs_skip_title_image_empty_and_grid_rows(extracted):
    table = extracted[0]["Test_Page_infobox0"]
    assert table.kind == "infobox"
    assert _texts(table.table) == [["Born", "Occupation", "Maker"], ["1 May 1960\nLondon", "Writer", "Kodak"]]


def test_texts_of_a_lead_table_have_no_segment(extracted):
    assert extracted[0]["Test_Page_0"].texts == {"TITLE": "Test Page",
                                                 "DESCRIPTION": "The Test Page is a page about tables."}


def test_section_title_text_and_caption(extracted):
    """The contents box and paragraphs inside (non-layout) tables are not prose."""
    texts = extracted[0]["Test_Page_1"].texts
    assert texts == {"TITLE": "Test Page", "DESCRIPTION": "The Test Page is a page about tables.",
                     "SEGMENT_TITLE": "Results",
                     "SEGMENT_TEXT": "First paragraph of the section. Second paragraph, on two source lines.",
                     "CAPTION": "Medal table"}


def test_section_text_is_cut_to_its_first_words():
    words = " ".join(f"w{i}" for i in range(150))
    html = (f"<h2>Part</h2><p>{words}</p>"
            "<table class='wikitable'><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>")
    tables, _ = html_tables.extract_html(_page(html))
    assert tables[0].texts["SEGMENT_TEXT"].split() == [f"w{i}" for i in range(html_tables.MAX_SEGMENT_WORDS)]
    assert tables[0].texts["SEGMENT_TITLE"] == "Part"


def test_the_wtq_table_carries_its_alias(extracted):
    tables = extracted[0]
    assert tables["Test_Page_1"].aliases == ("csv/203-csv/7.csv",)
    assert [name for name, t in tables.items() if t.aliases] == ["Test_Page_1"]
    tables_outside_wtq, _ = html_tables.extract_html(_page(table_index=1, key="html/7"))
    assert all(not t.aliases for t in tables_outside_wtq)


def test_a_table_that_is_wikitable_and_infobox_is_extracted_once_as_the_infobox():
    html = ("<table class='wikitable infobox'><tr><th colspan='2'>Ratings</th></tr>"
            "<tr><th>Allmusic</th><td>4/5</td></tr><tr><th>Rolling Stone</th><td>3/5</td></tr></table>")
    tables, rejections = html_tables.extract_html(_page(html, table_index=0))
    assert [(t.table.table_id, t.kind, t.aliases) for t in tables] == [
        (URL + "Test_Page_infobox0", "infobox", ("csv/203-csv/7.csv",))]
    assert [(r.table_id, r.reason) for r in rejections] == [(URL + "Test_Page_0", "extracted_as_infobox")]


def test_extracted_tables_become_interactions(extracted):
    interaction = to_interaction(extracted[0]["Test_Page_1"])
    assert interaction.id == URL + "Test_Page_1"
    assert [q.id for q in interaction.questions] == ["TITLE", "DESCRIPTION", "SEGMENT_TITLE", "SEGMENT_TEXT",
                                                     "CAPTION"]
    assert (interaction.table.caption, interaction.table.document_url) == ("Medal table", "http://crawl/url")


def test_an_empty_page_has_no_tables():
    assert html_tables.extract_html(_page("")) == ([], [])


def _write(folder, name, data: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return str(folder / name)


def test_read_page_from_html_gz_and_its_json(tmp_path):
    metadata = {"title": "Test Page", "url": "http://crawl/url", "tableIndex": 1, "hashcode": "x",
                "id": 42, "revision": 777}
    _write(tmp_path / "203-page", "7.json", json.dumps(metadata).encode())
    path = _write(tmp_path / "203-page", "7.html.gz", gzip.compress(PAGE.encode("utf-8")))
    page = read_page(path)
    assert (page.title, page.url, page.page_id, page.revision, page.source_key, page.wtq_table_index,
            page.metadata_source) == ("Test Page", "http://crawl/url", 42, 777, "203-page/7", 1, "json")
    assert page.html == PAGE
    tables, _ = html_tables.extract_html(page)
    assert [t.aliases for t in tables if t.aliases] == [("csv/203-csv/7.csv",)]


def test_without_json_the_crawl_comment_and_file_name_are_used(tmp_path):
    page = read_page(_write(tmp_path / "html", "Test_Page.html", PAGE.encode("utf-8")))
    assert (page.title, page.url, page.page_id, page.revision, page.source_key, page.wtq_table_index,
            page.metadata_source) == ("Test Page", URL[:-1] + "?action=render&curid=42&oldid=777",
                                      42, 777, "html/Test_Page", None, "file_name")
    comment = b"<!-- http%3A//en.wikipedia.org/wiki/Some_Title 2014 -->\n<p>x</p>"
    titled = parse_page("x/1.html", comment, None)
    assert (titled.title, titled.metadata_source) == ("Some Title", "comment")


@pytest.mark.parametrize("name, data, reason", [
    ("7.html.gz", b"this is not gzip", "bad_gzip"),
    ("8.html.gz", gzip.compress(PAGE.encode())[:-20], "bad_gzip"),
    ("9.html", b"<p>caf\xe9</p>", "invalid_utf8"),
])
def test_unusable_files_raise_a_page_error_naming_them(tmp_path, name, data, reason):
    path = _write(tmp_path / "203-page", name, data)
    with pytest.raises(PageError) as error:
        read_page(path)
    assert error.value.reason == reason and error.value.path == path and str(error.value).startswith(path)


def test_missing_page_and_bad_json_are_page_errors(tmp_path):
    with pytest.raises(PageError) as error:
        read_page(str(tmp_path / "203-page" / "404.html.gz"))
    assert error.value.reason == "missing_file"
    _write(tmp_path / "203-page", "5.json", b"{not json")
    path = _write(tmp_path / "203-page", "5.html", b"<p>x</p>")
    with pytest.raises(PageError) as error:
        read_page(path)
    assert error.value.reason == "bad_metadata" and error.value.path.endswith("5.json")


def test_a_german_page_with_colspan_99999_keeps_its_table_under_german_ids():
    """`colspan="99999"` ends at the table's edge, as the browser shows it; with cells after it
    the table is refused as `span_too_large`. Ids follow the crawl URL's wiki."""
    html = ("<table class=\"wikitable\"><tr><th>Jahr</th><th>Ort</th></tr>"
            "<tr><td>1990</td><td>Oslo</td></tr><tr><td colspan=\"99999\">abgesagt</td></tr>"
            "<tr><td>1994</td><td colspan=\"99999\">Lillehammer</td></tr></table>"
            "<table class=\"wikitable\"><tr><th>Name</th><th>Punkte</th></tr>"
            "<tr><td colspan=\"99999\">x</td><td>5</td></tr></table>")
    page = html_tables.HtmlPage(title="Spiele", url="http://de.wikipedia.org/wiki?action=render&curid=9",
                                page_id=9, revision=1, html=html, source_key="de/9")
    (table,), (rejection,) = html_tables.extract_html(page)
    assert table.table.table_id == "http://de.wikipedia.org/wiki/Spiele_0"
    assert _texts(table.table) == [["Jahr", "Ort"], ["1990", "Oslo"], ["1994", "Lillehammer"]]
    assert (table.stats.spans_narrowed, table.stats.caption_rows_dropped) == (2, 1)
    assert (rejection.reason, rejection.table_id) == ("span_too_large",
                                                      "http://de.wikipedia.org/wiki/Spiele_1")
