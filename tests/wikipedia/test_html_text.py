"""The visible text of rendered HTML: what a reader sees, line by line."""

import lxml.html
import pytest

from tapas_tf.wikipedia.html_text import cell_text, plain_text


def _cell(html):
    return lxml.html.fragment_fromstring(html)


@pytest.mark.parametrize("html, text", [
    # Lists and paragraphs inside a cell break lines as rendered; source newlines are spaces.
    ("<td><ul>\n<li>A</li>\n<li>B\n  b</li>\n</ul>C</td>", "A\nB b\nC"),
    # Comments are not shown; their tails are.
    ("<td>x<!-- hidden -->y</td>", "xy"),
    # Non-breaking spaces collapse like spaces; empty lines (two <br>s) are dropped.
    ("<td>1\xa0000<br/><br/>  m&#160;</td>", "1 000\nm"),
    # Superscripts that are content stay; editorial marks and "[edit]" links go.
    ("<td>km<sup>2</sup><sup class='reference'>[1]</sup><sup class='noprint'>[update]</sup></td>", "km2"),
    ("<td>Lead<span class='mw-editsection'>[edit]</span></td>", "Lead"),
    # Hidden by inline style, in any spacing or case; visible text after it stays.
    ("<td><span style='DISPLAY : None'>7001</span><b style='color:red'>7</b></td>", "7"),
])
def test_cell_text(html, text):
    assert cell_text(_cell(html)) == text


def test_plain_text_is_one_line():
    assert plain_text(_cell("<p>Two<br/>lines</p>")) == "Two lines"
