"""The pre-training data job (extract stage) on a tiny German multistream dump of damaged markup.

Every damaged table ends up in the report: closed at the page's end (`tables_autoclosed`), an
infobox recovered (`tables_infobox_recovered`), a span narrowed (`grid_spans_narrowed`) or
refused (`tables_rejected_span_too_large`), a table the parser cannot read
(`tables_rejected_markup_not_parsed`); and the ids are the German Wikipedia's, also for pages
read from byte ranges without the dump's header.
"""

import gzip

import pytest
from google.protobuf import text_format

from tapas_tf.beam_jobs import create_pretrain_data as job
from tapas_tf.data.protos import interaction_pb2
from tests.wikipedia.dump_fixtures import GERMAN, FixturePage, write_multistream

DE = "http://de.wikipedia.org/wiki/"
PAGES = [
    FixturePage("Glomma", "Die '''Glomma''' ist ein Fluss.\n\n== Nebenflüsse ==\nDie längsten.\n"
                "{| class=\"wikitable\"\n! Fluss !! Länge\n|-\n| Lågen || 199\n|-\n| Rena || 150\n",
                page_id=1),
    FixturePage("Anna Schmidt", "{{Infobox Person\n| Name = Anna Schmidt\n| Beruf = Schriftstellerin\n"
                "| Ehepartner = {{marriage|Karl Schmidt|1985\n| Wohnort = Berlin\n}}\n"
                "'''Anna Schmidt''' ist eine Schriftstellerin.", page_id=2),
    FixturePage("Medaillen", "{| class=\"wikitable\"\n! Jahr !! Ort !! Anmerkung\n|-\n"
                "| rowspan=\"2\" | 1990 || Oslo || erste\n|-\n| colspan=\"99999\" | abgesagt\n|}\n"
                "{| class=\"wikitable\"\n! Name !! Punkte\n|-\n| colspan=\"99999\" | x || 5\n|}", page_id=3),
    FixturePage("Karte", "[[Datei:Karte.png|mini|\n{| class=\"wikitable\"\n! a !! b\n|-\n| 1 || 2\n|}\n]]\n"
                "Eine Karte.", page_id=4),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("dewiki"), tmp_path_factory.mktemp("out")
    dump = folder / "dewiki-test-pages-articles-multistream.xml.bz2"
    write_multistream(dump, folder / "dewiki-test-pages-articles-multistream-index.txt.bz2", PAGES,
                      pages_per_stream=2, wiki=GERMAN)
    pretrain_job = job.PretrainJob(output_dir=str(out), input_dumps=(str(dump),), stage="extract",
                                   streams_per_range=1)
    report = job.run(pretrain_job, None, ["--direct_num_workers=1"])
    (path,) = (out / "interactions").glob("*.txtpb.gz")
    lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    interactions = [text_format.Parse(line, interaction_pb2.Interaction()) for line in lines]
    return report["counters"], {i.id: i for i in interactions}


def _grid(table):
    return [[c.text for c in table.columns]] + [[c.text for c in row.cells] for row in table.rows]


def test_every_damaged_table_is_counted(run):
    counters, _ = run
    assert counters == {
        "dump_ranges": 2, "pages_read": 4, "pages_with_tables": 3, "pages_without_tables": 1,
        "tables_extracted_wikitable": 2, "tables_extracted_infobox": 1,
        "tables_autoclosed": 1, "tables_infobox_recovered": 1, "grid_spans_narrowed": 1,
        "tables_rejected_span_too_large": 1, "tables_rejected_markup_not_parsed": 1,
    }


def test_the_tables_have_german_ids_and_their_cells(run):
    _, interactions = run
    assert sorted(interactions) == [DE + "Anna_Schmidt_infobox0", DE + "Glomma_0", DE + "Medaillen_0"]
    glomma = interactions[DE + "Glomma_0"]
    assert _grid(glomma.table) == [["Fluss", "Länge"], ["Lågen", "199"], ["Rena", "150"]]
    assert (glomma.table.document_url, glomma.table.context_heading) == (DE + "Glomma", "Nebenflüsse")
    # `Wohnort` became an argument of the {{marriage}} that lost its braces, as any parser reads it.
    assert _grid(interactions[DE + "Anna_Schmidt_infobox0"].table) == [
        ["Name", "Beruf", "Ehepartner"], ["Anna Schmidt", "Schriftstellerin", "Karl Schmidt"]]
    # `colspan="99999"` ends at the table's edge; under the rowspan it starts in the second column.
    assert _grid(interactions[DE + "Medaillen_0"].table) == [
        ["Jahr", "Ort", "Anmerkung"], ["1990", "Oslo", "erste"], ["1990", "abgesagt", "abgesagt"]]
