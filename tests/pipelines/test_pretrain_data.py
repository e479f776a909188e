"""The pre-training data job end to end on dumps and pages the tests write.

One module-scoped run reads a multistream dump (3 articles with tables, a redirect, a talk page,
a page whose parse fails) and two rendered pages (one is WTQ's table csv/203-csv/7.csv, excluded),
and writes interactions and examples; the tests check the counters, the files, the released text
format read back unchanged, determinism over 1 and 2 worker processes, and a Dataflow dry run.
"""

import gzip
import io
import json
import os
import subprocess

import pytest
import tensorflow as tf
from google.protobuf import text_format

from tapas_tf.beam_jobs import create_pretrain_data as job
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.pretrain_config import PretrainConfig
from tapas_tf.features.example_features import pretrain_parsing_spec
from tapas_tf.pipelines import pretrain_data
from tapas_tf.pipelines.progress import ProgressSettings
from tapas_tf.wikipedia import wikitext_tables
from tests.command_runner import TAPAS_TF
from tests.vocab_fixture import write_test_vocab
from tests.wikipedia.dump_fixtures import FixturePage, write_multistream

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUPES = 2


def _wikitable(rows):
    lines = ['{| class="wikitable"', "! " + " !! ".join(rows[0])]
    for row in rows[1:]:
        lines += ["|-", "| " + " || ".join(row)]
    return "\n".join(lines + ["|}"])


MEDALS = _wikitable([["Nation", "Gold", "Silver"], ["Norway", "4", "2"], ["Sweden", "3", "5"]])
PAGES = [
    FixturePage("Winter games", "The '''Winter games''' were held in 1990.\n\n== Medals ==\n"
                "The table lists the medals.\n" + MEDALS, page_id=1),
    FixturePage("Old games", "", page_id=2, redirect="Winter games"),
    FixturePage("Talk:Winter games", "Discussion.\n" + MEDALS, ns=1, page_id=3),
    FixturePage("Rivers", "Rivers of the north.\n\n== Longest ==\n"
                + _wikitable([["River", "Length"], ["Glomma", "621"], ["Dal", "520"]])
                + "\n\n== Other ==\n" + _wikitable([["no", "header"], ["x", "y"]]).replace("! ", "| "),
                page_id=4),
    FixturePage("Broken", "This page breaks the parser.", page_id=5),
    FixturePage("Lakes", "{{Infobox lake\n| name = Mjøsa\n| area = 369 km2\n| max_depth = 453 m\n}}"
                "Mjøsa is a lake.", page_id=6),
]
PAGE_HTML = ("<!-- http%3A//en.wikipedia.org/wiki%3Faction%3Drender%26curid%3D{id} 2014-06-13 -->\n"
             "<p>{title} is a page.</p><h2>Results</h2><p>Results of the year.</p>"
             '<table class="wikitable"><tr><th>Team</th><th>Points</th></tr>'
             "<tr><td>Lions</td><td>10</td></tr><tr><td>Bears</td><td>7</td></tr></table>")


def _write_inputs(folder):
    dump = folder / "enwiki-test-pages-articles-multistream.xml.bz2"
    write_multistream(dump, folder / "enwiki-test-pages-articles-multistream-index.txt.bz2", PAGES,
                      pages_per_stream=2)
    for number, title in ((7, "League A"), (8, "League B")):
        page_dir = folder / "pages" / "203-page"
        page_dir.mkdir(parents=True, exist_ok=True)
        (page_dir / f"{number}.html.gz").write_bytes(gzip.compress(
            PAGE_HTML.format(id=number, title=title).encode("utf-8")))
        (page_dir / f"{number}.json").write_text(json.dumps(
            {"title": title, "url": f"http://en.wikipedia.org/wiki?curid={number}", "id": number,
             "revision": 1, "tableIndex": 0}))
    exclusions = folder / "exclude.txt"
    exclusions.write_text("# evaluation tables\ntable_csv/203_7.csv\n")
    return dump, exclusions


def _run(folder, out, *extra, progress_settings=None):
    dump, exclusions = _write_inputs(folder)
    vocab = write_test_vocab(str(folder / "vocab.txt"), ["norway", "sweden", "glomma", "lions", "bears"])
    pretrain_job = job.PretrainJob(output_dir=str(out), input_dumps=(str(dump),),
                                   input_pages=(str(folder / "pages" / "*" / "*.html.gz"),),
                                   exclude_tables=str(exclusions), streams_per_range=1)
    config = PretrainConfig(vocab_file=vocab, dupe_factor=DUPES, max_seq_length=64, test_fraction=0.0)
    return job.run(pretrain_job, config, list(extra), progress_settings)  # extra: Beam's pipeline options.


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    out = tmp_path_factory.mktemp("out")
    original = wikitext_tables.extract_page_tables

    def breaking(page, *args, **kwargs):
        if page.title == "Broken":
            raise wikitext_tables.PageParseError(page.title, "the parser gave up")
        return original(page, *args, **kwargs)

    wikitext_tables.extract_page_tables = breaking
    try:
        report = _run(folder, out, "--direct_num_workers=1")
    finally:
        wikitext_tables.extract_page_tables = original
    return report, out


def test_every_page_and_table_is_counted(run):
    counters = run[0]["counters"]
    assert counters["pages_read"] == 6 + 2
    assert counters["dump_ranges"] == 3
    assert counters["pages_skipped_redirect"] == 1 and counters["pages_skipped_not_article"] == 1
    assert counters["pages_failed_parse_error"] == 1
    assert counters["tables_extracted_wikitable"] == 2 + 1  # Winter games, Rivers; League B.
    assert counters["tables_extracted_infobox"] == 1
    assert counters["tables_rejected_no_header_row"] == 1
    assert counters["tables_excluded"] == 1  # League A is WTQ's csv/203-csv/7.csv (SQA's 203_7).
    assert counters["interactions_read"] == 4
    written = counters.get("examples_written_train", 0)
    assert written + sum(v for k, v in counters.items() if k.startswith("examples_skipped_")) == 4 * DUPES


def test_progress_shows_the_pages_interactions_and_examples_of_the_report(tmp_path):
    stream = io.StringIO()
    (tmp_path / "in").mkdir()
    report = _run(tmp_path / "in", tmp_path / "out", "--direct_num_workers=1",
                  progress_settings=ProgressSettings(stream=stream, tty=True))
    counters = report["counters"]
    assert counters["pages_read"] == 8
    final = stream.getvalue().split("\r")[-1]
    assert final.startswith(f"create_pretrain_data done: 8 pages, {counters['interactions_read']} interactions, "
                            f"{counters['examples_written_train']} examples [")


def test_interactions_are_written_in_the_released_text_format(run):
    _, out = run
    (path,) = (out / "interactions").glob("*.txtpb.gz")
    lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    interactions = {i.id: i for i in (text_format.Parse(line, interaction_pb2.Interaction()) for line in lines)}
    winter = interactions["http://en.wikipedia.org/wiki/Winter_games_0"]
    assert [c.text for c in winter.table.columns] == ["Nation", "Gold", "Silver"]
    assert {q.id: q.original_text for q in winter.questions}["TITLE"] == "Winter games"
    assert {q.id for q in winter.questions} >= {"TITLE", "DESCRIPTION", "SEGMENT_TITLE"}
    assert "http://en.wikipedia.org/wiki/League_B_0" in interactions
    assert not any("League_A" in key for key in interactions)


def test_examples_parse_with_the_pretraining_spec(run):
    report, out = run
    paths = [str(p) for p in (out / "tf_examples").glob("train-*.tfrecord")]
    spec = pretrain_parsing_spec(64, 20)
    examples = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(paths)]
    assert len(examples) == report["counters"]["examples_written_train"] > 0
    for example in examples:
        assert int(tf.reduce_sum(example["masked_lm_weights"])) >= 1
        assert int(example["input_ids"][0]) == 3  # [CLS] of the test vocabulary.
    assert json.load(open(out / job.REPORT_FILE))["counters"] == report["counters"]


def test_released_text_protos_are_read_unchanged(tmp_path):
    """Google's released corpus: one text proto per line, gzipped; a bad line is counted."""
    released = interaction_pb2.Interaction()
    text_format.Parse('table { columns { text: "Year" } columns { text: "Film" } rows { cells { text: "2013\\n(1st)" } '
                      'cells { text: "Main Hoon Shahid Afridi" } } table_id: "http://en.wikipedia.org/wiki/ARY_1" } '
                      'questions { id: "TITLE" original_text: "ARY Film Award for Best Dialogue" }', released)
    path = tmp_path / "interactions.txtpb.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text_format.MessageToString(released, as_one_line=True) + "\nthis is not a proto\n")
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    pretrain_job = job.PretrainJob(output_dir=str(tmp_path / "out"), stage="examples",
                                   input_interactions=(str(path),))
    config = PretrainConfig(vocab_file=vocab, dupe_factor=3, max_seq_length=64, test_fraction=0.0)
    counters = job.run(pretrain_job, config, [])["counters"]
    assert counters["interactions_read"] == 1 and counters["interactions_bad_line"] == 1
    assert counters["examples_written_train"] == 3


def _sorted_examples(out):
    records = []
    for path in sorted((out / "tf_examples").glob("*.tfrecord")):
        records += [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    return sorted(records)


def test_same_seed_same_examples_with_one_or_two_worker_processes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _run(tmp_path / "a", tmp_path / "one", "--direct_num_workers=1")
    two = _run(tmp_path / "b", tmp_path / "two", "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert one["counters"]["examples_written_train"] == two["counters"]["examples_written_train"]
    assert _sorted_examples(tmp_path / "one") == _sorted_examples(tmp_path / "two")


def test_dataflow_dry_run_translates_the_job_graph(tmp_path):
    (tmp_path / "in").mkdir()
    report = _run(tmp_path / "in", tmp_path / "out", "--runner=DataflowRunner", "--project=tapas-test",
                  "--region=us-central1", "--temp_location=gs://tapas-test-bucket/tmp", "--dry_run=True")
    assert report["dry_run"] is True
    (wheel,) = report["extra_packages"]  # The job packaged itself for the workers.
    assert os.path.basename(wheel).startswith("tapas_tf-") and wheel.endswith(".whl")
    names = {t.unique_name for t in report["job"].proto_pipeline.components.transforms.values()}
    assert {"Extract/Dumps/Extract", "Extract/Pages/Extract", "Examples/MakeExamples", "Write/train"} <= names


@pytest.mark.parametrize("line, name", [
    ("csv/204-csv/590.csv", "csv/204-csv/590.csv"), ("204-csv/590.csv", "csv/204-csv/590.csv"),
    ("table_csv/204_590.csv", "csv/204-csv/590.csv"), ("  http://en.wikipedia.org/wiki/X_1 ", "http://en.wikipedia.org/wiki/X_1"),
    ("title:Winter games", "title:winter games"), ("title:Winter_Games ", "title:winter games"), ("# comment", None), ("", None),
])
def test_exclusion_lines(line, name):
    assert pretrain_data.normalize_exclusion(line) == name


def test_cli_errors_are_one_line(tmp_path):
    result = subprocess.run([*TAPAS_TF, "create-pretrain-data", f"--output_dir={tmp_path}", "--input_pagse=x"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "did you mean --input_pages?" in result.stderr
    result = subprocess.run([*TAPAS_TF, "create-pretrain-data", f"--output_dir={tmp_path}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "needs --input_dumps or --input_pages" in result.stderr.strip().splitlines()[-1]


def _write_releases(folder):
    """WTQ: training.tsv names csv/203-csv/8.csv (League B's table); 7 (League A's) is a test table.
    TabFact: a val table captioned "Rivers", so the page Rivers is left out too."""
    wtq, tabfact = folder / "wtq", folder / "tabfact"
    (wtq / "csv" / "203-csv").mkdir(parents=True)
    for n in (7, 8):
        (wtq / "csv" / "203-csv" / f"{n}.csv").write_text("Team,Points\nLions,10\n")
    (wtq / "training.tsv").write_text("id\tutterance\tcontext\ttargetValue\nnt-0\tq?\tcsv/203-csv/8.csv\tx\n")
    (tabfact / "all_csv").mkdir(parents=True)
    (tabfact / "train_examples.json").write_text(json.dumps({"1-1-1.html.csv": [["s"], [1], "winter games"]}))
    (tabfact / "val_examples.json").write_text(json.dumps({"1-1-2.html.csv": [["s"], [0], "rivers"]}))
    return wtq, tabfact


def test_the_training_data_rule_leaves_out_evaluation_pages_and_lists_the_rest(tmp_path):
    from tapas_tf.data.table_manifest import read_manifest

    (tmp_path / "in").mkdir()
    dump, _ = _write_inputs(tmp_path / "in")
    wtq, tabfact = _write_releases(tmp_path / "in")
    out = tmp_path / "out"
    pretrain_job = job.PretrainJob(output_dir=str(out), stage="extract", input_dumps=(str(dump),),
                                   input_pages=(str(tmp_path / "in" / "pages" / "*" / "*.html.gz"),),
                                   wtq_release=str(wtq), tabfact_release=str(tabfact),
                                   wtq_pages=str(tmp_path / "in" / "pages"), streams_per_range=1)
    report = job.run(pretrain_job, None, ["--direct_num_workers=1"])
    rule = report["training_rule"]
    assert rule["applied"] and rule["kept"] == 3  # Winter games, Lakes' infobox, League B.
    assert rule["excluded_by_reason"] == {"page_holds_evaluation_table": 1, "page_is_tabfact_evaluation_caption": 1}
    assert report["counters"]["tables_rule_kept"] == 3
    manifest = read_manifest(str(out / "training_tables.txt.gz"))
    assert sorted(manifest) == ["page:203-page/8#0", "page:Lakes#infobox0", "page:Winter games#0"]
    titles = set()
    for path in (out / "interactions").iterdir():
        for line in gzip.open(path, "rt", encoding="utf-8"):
            titles.add(text_format.Parse(line, interaction_pb2.Interaction()).table.document_title)
    assert titles == {"Winter games", "Lakes", "League B"}


def test_without_a_release_the_rule_is_not_applied_and_says_so(tmp_path, caplog):
    (tmp_path / "in").mkdir()
    dump, _ = _write_inputs(tmp_path / "in")
    pretrain_job = job.PretrainJob(output_dir=str(tmp_path / "out"), stage="extract", input_dumps=(str(dump),))
    with caplog.at_level("WARNING"):
        report = job.run(pretrain_job, None, ["--direct_num_workers=1"])
    assert report["training_rule"] == {"applied": False}
    assert "the training-data rule is not applied" in caplog.text
    with pytest.raises(ValueError, match="read with --wtq_release"):
        job.PretrainJob(output_dir=str(tmp_path / "o"), input_dumps=(str(dump),), sqa_release=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="--wtq_release=.*no such directory"):
        job.PretrainJob(output_dir=str(tmp_path / "o"), input_dumps=(str(dump),), wtq_release=str(tmp_path / "x"))
