"""The dump reader: plain, bz2 and multistream dumps, byte ranges, and damage that loses nothing before it."""

import bz2
import pickle

import pytest

from tapas_tf.wikipedia import dump_reader
from tapas_tf.wikipedia.dump_reader import DumpError, Page, iter_pages, stream_offsets, stream_ranges
from tests.wikipedia.dump_fixtures import (
    GERMAN,
    FixturePage,
    Wiki,
    dump_xml,
    numbered_pages,
    write_dump,
    write_multistream,
)

PAGES = [
    FixturePage("Alpha", "'''Alpha''' is a <b>letter</b> & more.", page_id=12, revision_id=500),
    FixturePage("Alpha letter", "#REDIRECT [[Alpha]]", page_id=13, revision_id=501, redirect="Alpha"),
    FixturePage("Talk:Alpha", "A talk page.", ns=1, page_id=14, revision_id=502),
]


def _pages(items):
    return [item for item in items if isinstance(item, Page)]


def _errors(items):
    return [item for item in items if isinstance(item, DumpError)]


@pytest.mark.parametrize("name, version", [("dump.xml", "0.10"), ("dump.xml.bz2", "0.11"),
                                           ("dump.xml", "0.99")])
def test_plain_and_bz2_dumps_of_any_export_version(tmp_path, name, version):
    path = tmp_path / name
    write_dump(path, PAGES, version)
    items = list(iter_pages(str(path)))
    assert _errors(items) == []
    assert items == [
        Page("Alpha", 0, 12, 500, None, "'''Alpha''' is a <b>letter</b> & more."),
        Page("Alpha letter", 0, 13, 501, "Alpha", "#REDIRECT [[Alpha]]"),
        Page("Talk:Alpha", 1, 14, 502, None, "A talk page."),
    ]


def test_multistream_whole_file_index_and_byte_ranges(tmp_path):
    pages = numbered_pages(7)
    path, index = tmp_path / "multistream.xml.bz2", tmp_path / "multistream-index.txt.bz2"
    offsets = write_multistream(path, index, pages, pages_per_stream=2)
    titles = [page.title for page in pages]
    assert [page.title for page in _pages(iter_pages(str(path)))] == titles
    assert stream_offsets(str(index)) == offsets
    for per_range in (1, 2, 5):
        ranges = stream_ranges(offsets, per_range)
        assert ranges[-1][1] is None
        read = [item for start, end in ranges for item in iter_pages(str(path), start, end)]
        assert _errors(read) == [] and [page.title for page in read] == titles
    # A range that starts at byte 0 holds the header stream, and one stream of pages.
    first = list(iter_pages(str(path), 0, offsets[1]))
    assert [page.page_id for page in first] == [1, 2]
    # The last range holds the closing tag; a middle one holds neither root tag.
    assert [page.page_id for page in iter_pages(str(path), offsets[3], None)] == [7]
    assert [page.page_id for page in iter_pages(str(path), offsets[1], offsets[3])] == [3, 4, 5, 6]
    assert list(iter_pages(str(path), offsets[1], offsets[1])) == []


def test_truncated_multistream_keeps_the_pages_before_the_damage(tmp_path):
    path, index = tmp_path / "cut.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(path, index, numbered_pages(6), pages_per_stream=2)
    data = path.read_bytes()
    path.write_bytes(data[:offsets[2] + 40])  # Cut inside the third stream of pages.
    items = list(iter_pages(str(path)))
    assert [page.page_id for page in _pages(items)] == [1, 2, 3, 4]
    (error,) = _errors(items)
    assert items[-1] is error and error.fatal and error.reason == "truncated_bz2"
    assert error.position == offsets[2]
    assert str(error).startswith(f"{path}: bz2 stream at byte {offsets[2]}: ")
    assert "after page 'Page 3', id 4" in str(error)


def test_truncated_single_stream_bz2(tmp_path):
    path = tmp_path / "cut.xml.bz2"
    write_dump(path, PAGES)
    path.write_bytes(path.read_bytes()[:-30])
    (error,) = list(iter_pages(str(path)))
    assert (error.reason, error.position, error.fatal) == ("truncated_bz2", 0, True)
    assert "before any page" in str(error)


def test_corrupt_bz2_stream(tmp_path):
    path, index = tmp_path / "bad.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(path, index, numbered_pages(4), pages_per_stream=2)
    data = bytearray(path.read_bytes())
    data[offsets[1]:offsets[1] + 4] = b"XXXX"  # The second stream of pages loses its magic.
    path.write_bytes(bytes(data))
    items = list(iter_pages(str(path)))
    assert [page.page_id for page in _pages(items)] == [1, 2]
    assert items[-1].reason == "damaged_bz2" and items[-1].position == offsets[1]


def test_broken_xml_keeps_the_pages_before_it(tmp_path):
    path = tmp_path / "broken.xml"
    text = dump_xml(numbered_pages(3))
    broken = text.replace("<title>Page 2</title>", "<title>Page 2</titel>")
    path.write_text(broken, encoding="utf-8")
    items = list(iter_pages(str(path)))
    assert [page.page_id for page in _pages(items)] == [1, 2]
    assert items[-1].reason == "broken_xml" and items[-1].fatal
    message = str(items[-1])
    assert message.startswith(f"{path}: broken XML (") and "line 34, column 26" in message
    assert message.endswith("(after page 'Page 1', id 2)")


def test_xml_that_ends_early(tmp_path):
    path = tmp_path / "short.xml"
    text = dump_xml(numbered_pages(2))
    path.write_text(text[:text.index("<title>Page 1</title>")], encoding="utf-8")
    items = list(iter_pages(str(path)))
    assert [page.page_id for page in _pages(items)] == [1]
    assert items[-1].reason == "broken_xml" and "ends early" in str(items[-1])


def test_a_page_without_an_id_costs_only_itself(tmp_path):
    path = tmp_path / "dump.xml"
    text = dump_xml(numbered_pages(3)).replace("<id>2</id>", "<id>two</id>")
    path.write_text(text, encoding="utf-8")
    items = list(iter_pages(str(path)))
    assert [page.page_id for page in _pages(items)] == [1, 3]
    (error,) = _errors(items)
    assert error.reason == "bad_page" and not error.fatal and "'two'" in str(error)


def test_not_a_dump_and_missing_file(tmp_path):
    path = tmp_path / "other.xml"
    path.write_text("<html><body/></html>")
    (error,) = list(iter_pages(str(path)))
    assert error.reason == "broken_xml" and "<html> is not <mediawiki>" in str(error)
    (missing,) = list(iter_pages(str(tmp_path / "nope.xml.bz2")))
    assert missing.reason == "unreadable_file" and "nope.xml.bz2" in str(missing)
    copy = pickle.loads(pickle.dumps(missing))  # Beam pickles what it counts.
    assert (copy.reason, str(copy), copy.path, copy.fatal) == (missing.reason, str(missing), missing.path,
                                                               True)


def test_a_range_that_ends_or_starts_inside_a_stream(tmp_path):
    path, index = tmp_path / "m.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(path, index, numbered_pages(4), pages_per_stream=2)
    items = list(iter_pages(str(path), offsets[0], offsets[1] - 5))
    assert items[-1].reason == "truncated_bz2" and items[-1].position == offsets[0]
    (error,) = list(iter_pages(str(path), offsets[0] + 7, None))  # Not a stream offset.
    assert error.reason == "bad_range" and f"byte {offsets[0] + 7} of a bz2 file" in str(error)


def test_the_tree_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """Pages are cleared and dropped from the root once read, and bz2 output comes in bounded
    chunks, so memory stays flat."""
    path = tmp_path / "many.xml.bz2"
    write_dump(path, numbered_pages(300, text="x" * 200))
    children = []
    real_page = dump_reader._page

    def spy(element, cursor):
        children.append(len(element.getparent()))
        return real_page(element, cursor)

    monkeypatch.setattr(dump_reader, "_page", spy)
    monkeypatch.setattr(dump_reader, "CHUNK_BYTES", 4096)
    assert len(_pages(iter_pages(str(path)))) == 300
    # At most the pages of one 4 kB chunk (about 8) are in the tree at once, never the whole file.
    assert max(children) <= 12 and len(children) == 300


def test_stream_offsets_sorted_unique_and_bad_lines(tmp_path):
    index = tmp_path / "index.txt"
    index.write_text("600:1:A\n600:2:B: with colon\n100:3:C\n\n", encoding="utf-8")
    assert stream_offsets(str(index)) == [100, 600]
    bad = tmp_path / "bad-index.txt.bz2"
    bad.write_bytes(bz2.compress(b"600:1:A\nnot an offset\n"))
    with pytest.raises(DumpError, match=r"bad-index.txt.bz2:2: not an 'offset:page_id:title' line"):
        stream_offsets(str(bad))
    assert stream_ranges([5, 9, 20], 2) == [(5, 20), (20, None)]


def test_pages_carry_the_wiki_of_their_dump(tmp_path):
    """A German dump's `<siteinfo>` gives its pages `http://de.wikipedia.org/wiki/`, also in a byte
    range that holds no header (it is read from the first stream); without `<base>` and
    `<dbname>`, the root's `xml:lang` says which Wikipedia it is."""
    path, index = tmp_path / "dewiki-multistream.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(path, index, numbered_pages(4), pages_per_stream=2, wiki=GERMAN)
    german = "http://de.wikipedia.org/wiki/"
    assert {page.wiki_base for page in iter_pages(str(path))} == {german}
    assert {page.wiki_base for page in iter_pages(str(path), offsets[1], None)} == {german}
    assert dump_reader.read_wiki_base(str(path)) == german
    plain = tmp_path / "frwiki.xml"
    write_dump(plain, numbered_pages(1), wiki=Wiki("fr", None, None))
    assert [page.wiki_base for page in iter_pages(str(plain))] == ["http://fr.wikipedia.org/wiki/"]
    bare = tmp_path / "bare.xml"
    write_dump(bare, numbered_pages(1), wiki=Wiki(None, None, None))
    assert [page.wiki_base for page in iter_pages(str(bare))] == ["http://en.wikipedia.org/wiki/"]


def test_the_opener_reads_every_byte(tmp_path):
    """Byte ranges and the bz2 probe go through `opener` (the Beam job's file systems, gs://)."""
    path, index = tmp_path / "m.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(path, index, numbered_pages(4), pages_per_stream=2, wiki=GERMAN)
    opened = []

    def opener(name):
        opened.append(name)
        return open(name, "rb")

    pages = list(iter_pages("remote:" + str(path), offsets[1], None,
                            opener=lambda name: opener(name.removeprefix("remote:"))))
    assert [page.page_id for page in pages] == [3, 4]
    assert pages[0].wiki_base == "http://de.wikipedia.org/wiki/"
    assert opened and set(opened) == {str(path)}
