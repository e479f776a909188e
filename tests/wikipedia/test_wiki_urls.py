"""Which wiki a dump or page is: the article base of its table ids and URLs."""

import pytest

from tapas_tf.wikipedia.wiki_urls import WIKI_BASE, base_from_dbname, base_from_url, site_base


@pytest.mark.parametrize("url, any_path, base", [
    ("https://de.wikipedia.org/wiki/Wikipedia:Hauptseite", False, "http://de.wikipedia.org/wiki/"),
    ("https://en.wikipedia.org/wiki/Main_Page", False, WIKI_BASE),
    ("http://en.wikipedia.org/wiki?action=render&curid=1&oldid=2", False, WIKI_BASE),
    ("https://wiki.example.org/index.php?title=Main_Page", False,
     "https://wiki.example.org/index.php?title="),
    ("https://wiki.example.org/pages/Main_Page", True, "https://wiki.example.org/pages/"),
    ("https://wiki.example.org/pages/Main_Page", False, None),
    ("http://crawl/url", False, None),
    ("not a url", True, None),
])
def test_base_from_url(url, any_path, base):
    assert base_from_url(url, any_path) == base


@pytest.mark.parametrize("dbname, base", [
    ("dewiki", "http://de.wikipedia.org/wiki/"),
    ("zh_yuewiki", "http://zh-yue.wikipedia.org/wiki/"),
    ("frwiktionary", "https://fr.wiktionary.org/wiki/"),
    ("my_own_db", None),
])
def test_base_from_dbname(dbname, base):
    assert base_from_dbname(dbname) == base


def test_site_base_trusts_the_base_then_the_dbname_then_the_language():
    dutch = "https://nl.wikipedia.org/wiki/Hoofdpagina"
    assert site_base(dutch, "dewiki", "fr") == "http://nl.wikipedia.org/wiki/"
    assert site_base("", "dewiki", "fr") == "http://de.wikipedia.org/wiki/"
    assert site_base("", "", "fr") == "http://fr.wikipedia.org/wiki/"
    assert site_base("", "private", "not a language!") == WIKI_BASE
