"""Wikitext markup to the plain text a reader sees: links, templates (nested), references, breaks."""

import mwparserfromhell
import pytest

from tapas_tf.wikipedia.wikitext_text import cell_text, paragraphs, render


def _cell(markup):
    return cell_text(mwparserfromhell.parse(markup, skip_style_tags=True))


@pytest.mark.parametrize("markup, text", [
    ("'''[[Foo|bar]]''' &amp; ''[[Baz]]''s", "bar & Bazs"),
    ("2013<br />(1st)", "2013\n(1st)"),
    ("2013 <br> <br/> (1st)\n", "2013\n(1st)"),
    ("a\n  b\t c", "a b c"),
    ("c<ref name=x>{{cite web|title=T}}</ref><ref name=y/>", "c"),
    ("{{nowrap|A {{small|b {{sortname|John|Smith}}}}}}", "A b John Smith"),
    ("{{flagicon|USA}} {{flag|Canada}}", "Canada"),
    ("{{dts|2001|5|12}} / {{dts|2001-05-12|format=dmy}} / {{birth date and age|1960|5|1|df=y}}",
     "May 12, 2001 / 12 May 2001 / 1 May 1960"),
    ("{{start date|1999}} {{dts|1999|May}}", "1999 May 1999"),
    ("{{convert|10|km|mi}}; {{convert|10|to|20|km}}", "10 km; 10 to 20 km"),
    ("{{yes}} {{no|Not yet}} {{n/a|}}", "Yes Not yet N/A"),
    ("[[File:x.jpg|thumb|cap]][[Category:X]][[de:Foo]] [[:Category:Bar|bar]]", "bar"),
    ("[http://x.org label] [http://y.org] http://z.org", "label http://z.org"),
    ("{{ubl|a|b}} {{hlist|c|d}}", "a\nb\nc, d"),
    ("{{plainlist|\n* a\n* b}}", "a\nb"),
    ("x<!-- hidden -->&nbsp;y {{cn}}{{efn|note}}", "x y"),
    ("{{lang|fr|texte}} {{lang-de|Wort}} {{sort|2|two}}", "texte Wort two"),
    ("<small>(1st)</small> <sup>a</sup> <span style=\"x\">b</span>", "(1st) a b"),
    ("l''''Orient'''", "l'Orient"),
    ("{{frac|3|1|2}} {{ill|Foo|de|Föö}} {{unknown template|visible?}}", "3 1/2 Foo"),
    ("<math>x^2</math>y", "y"),
    ("{{formatnum: 10056}} {{formatnum:34.62}} {{nts|1234567}} {{uc:abc}} {{#if:x|shown?}}",
     "10,056 34.62 1,234,567 ABC"),
    ("{{bartable|87.5||2||background:darkblue}}%", "87.5%"),
])
def test_cell_text(markup, text):
    assert _cell(markup) == text


def test_prose_paragraphs_split_at_blank_lines():
    markup = "{{Infobox x|a=b}}\nFirst ''para'' ({{IPAc-en|x}}; {{lang-fr|}})\ngoes on.\n\n\nSecond.<br>Line"
    raw = render(mwparserfromhell.parse(markup, skip_style_tags=True))
    assert paragraphs(raw) == ["First para goes on.", "Second. Line"]
