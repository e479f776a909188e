"""The training-table manifest: read, write, merge, and bad lines named by file and line."""

import gzip

import pytest

from tapas_tf.data import table_manifest


def test_write_sorts_and_deduplicates_and_read_gives_it_back(tmp_path):
    path = str(tmp_path / table_manifest.MANIFEST_FILE)
    names = ["wtq:csv/204-csv/590.csv", "page:204-page/590#infobox0", "wtq:csv/204-csv/590.csv",
             "tabfact:2-1000181-1.html.csv", "sqa:table_csv/204_590.csv", "page:Some title#0"]
    assert table_manifest.write_manifest(path, names) == 5
    with gzip.open(path, "rt", encoding="utf-8") as f:
        assert f.read().splitlines() == sorted(set(names))
    assert table_manifest.read_manifest(path) == sorted(set(names))


def test_merge_is_the_sorted_union(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    first.write_text("wtq:csv/204-csv/1.csv\n\npage:204-page/1#0\n")
    with gzip.open(second, "wt") as f:
        f.write("wtq:csv/204-csv/1.csv\nsqa:table_csv/203_2.csv\n")
    assert table_manifest.merge_manifests([str(first), str(second)]) == [
        "page:204-page/1#0", "sqa:table_csv/203_2.csv", "wtq:csv/204-csv/1.csv"]


@pytest.mark.parametrize("line", ["csv/204-csv/1.csv", "imdb:tt0111161", "wtq:", " wtq:csv/204-csv/1.csv"])
def test_a_line_that_is_not_kind_colon_name_is_named(tmp_path, line):
    path = tmp_path / "m.txt"
    path.write_text(f"wtq:csv/204-csv/1.csv\n{line}\n")
    with pytest.raises(table_manifest.ManifestError, match=rf"^{path}:2: not a manifest line"):
        table_manifest.read_manifest(str(path))


def test_a_truncated_gzip_manifest_is_an_error(tmp_path):
    path = tmp_path / "m.txt.gz"
    data = gzip.compress(("".join(f"wtq:csv/204-csv/{i}.csv\n" for i in range(2000))).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(OSError, match="truncated"):
        table_manifest.read_manifest(str(path))
