"""Input files of the pre-training job that cannot be read to their end (issue 55).

A truncated bz2 dump, a truncated or non-gzip interaction file, a TFRecord cut short and a page
that is not gzip: what was read before the damage is kept, the file is counted
(`files_failed_{reason}`) and listed in failures/files.tsv and the report's `file_failures` with
the byte or record where it broke off, and the command line exits 1 (0 with
`--allow_file_failures`). A bad line inside a file that reads is still only counted.
"""

import gzip
import json

import pytest
from google.protobuf import text_format

from tapas_tf.beam_jobs import create_pretrain_data as job
from tapas_tf.data import interaction_io
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.pretrain_config import PretrainConfig
from tests.command_runner import run_command
from tests.vocab_fixture import write_test_vocab
from tests.wikipedia.dump_fixtures import FixturePage, write_multistream

TABLE = '{| class="wikitable"\n! City !! People\n|-\n| Oslo || 700\n|-\n| Bergen || 290\n|}'
PAGES = [FixturePage(f"Town {i}", f"Town {i} is a town.\n\n== Size ==\nThe sizes.\n{TABLE}", page_id=i + 1)
         for i in range(4)]


def _interaction(number: int) -> interaction_pb2.Interaction:
    interaction = interaction_pb2.Interaction(id=f"t{number}")
    table = interaction.table
    table.table_id = f"table-{number}"
    for name in ("City", "People"):
        table.columns.add(text=name)
    for city, people in (("Oslo", "700"), ("Bergen", str(number))):
        row = table.rows.add()
        row.cells.add(text=city)
        row.cells.add(text=people)
    interaction.questions.add(id="TITLE", original_text=f"Towns {number}")
    return interaction


def _text_lines(count: int) -> bytes:
    return "".join(text_format.MessageToString(_interaction(i), as_one_line=True) + "\n"
                   for i in range(count)).encode("utf-8")


def _truncated_dump(tmp_path):
    """Four pages, one bz2 stream each, read as one file (no index), cut inside the last stream."""
    dump = tmp_path / "enwiki-test-pages-articles-multistream.xml.bz2"
    offsets = write_multistream(dump, tmp_path / "index.txt.bz2", PAGES, pages_per_stream=1)
    data = dump.read_bytes()
    cut = offsets[-1] + 20
    dump.write_bytes(data[:cut])
    return dump, cut


def _examples_job(tmp_path, *paths):
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"), ["oslo", "bergen"])
    pretrain_job = job.PretrainJob(output_dir=str(tmp_path / "out"), stage="examples",
                                   input_interactions=tuple(str(p) for p in paths))
    config = PretrainConfig(vocab_file=vocab, dupe_factor=1, max_seq_length=64, test_fraction=0.0)
    return job.run(pretrain_job, config, [])


def test_truncated_gzip_of_interactions_raises_naming_file_and_byte(tmp_path):
    path = tmp_path / "interactions.txtpb.gz"
    data = gzip.compress(_text_lines(50))
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(interaction_io.InteractionFileError) as raised:
        list(interaction_io.read_interactions(str(path)))
    assert raised.value.reason == "truncated_gzip"
    assert str(path) in str(raised.value) and f"byte {len(data) // 2}" in str(raised.value)


def test_counting_reader_yields_bad_lines_and_raises_at_the_damage(tmp_path):
    path = tmp_path / "interactions.txtpb.gz"
    data = gzip.compress(_text_lines(2) + b"not a proto\n" + b"\xff\xfe\n" + _text_lines(1))
    path.write_bytes(data)
    items = list(interaction_io.read_interactions_counting_lines(str(path)))
    errors = [i for i in items if isinstance(i, interaction_io.InteractionFormatError)]
    assert len(items) == 5 and len(errors) == 2
    assert f"{path}:3:" in str(errors[0]) and f"{path}:4: not UTF-8" in str(errors[1])
    path.write_bytes(data[:-10])
    read = []
    with pytest.raises(interaction_io.InteractionFileError):
        for item in interaction_io.read_interactions_counting_lines(str(path)):
            read.append(item)
    assert len(read) >= 2  # The lines before the damage were yielded.


def test_the_job_keeps_what_came_before_a_truncated_interaction_file(tmp_path):
    whole = tmp_path / "whole.txtpb.gz"
    whole.write_bytes(gzip.compress(_text_lines(3) + b"not a proto\n"))
    cut = tmp_path / "cut.txtpb.gz"
    data = gzip.compress(_text_lines(40))
    cut.write_bytes(data[:len(data) // 2])
    report = _examples_job(tmp_path, whole, cut)
    counters = report["counters"]
    assert counters["interaction_files_read"] == 2
    assert counters["interactions_bad_line"] == 1  # A bad line of a file that reads: counted only.
    assert counters["files_failed_truncated_gzip"] == 1
    assert 3 < counters["interactions_read"] < 43  # whole's 3 and the lines of cut before the damage.
    assert counters["examples_written_train"] == counters["interactions_read"]
    (failure,) = report["file_failures"]
    assert failure["path"] == str(cut) and failure["reason"] == "truncated_gzip"
    assert f"byte {len(data) // 2}" in failure["message"]
    saved = json.loads((tmp_path / "out" / job.REPORT_FILE).read_text())
    assert saved["file_failures"] == report["file_failures"]
    lines = (tmp_path / "out" / job.FILE_FAILURES_FILE).read_text().splitlines()
    assert lines == [f"{cut}\ttruncated_gzip\t{failure['message']}"]


def test_a_tfrecord_cut_short_and_a_file_that_is_not_gzip(tmp_path):
    records = tmp_path / "interactions.tfrecord"
    interaction_io.write_interactions(str(records), [_interaction(i) for i in range(5)])
    data = records.read_bytes()
    records.write_bytes(data[:len(data) - 30])
    not_gzip = tmp_path / "other.txtpb.gz"
    not_gzip.write_bytes(_text_lines(2))  # Text, named as gzip.
    report = _examples_job(tmp_path, records, not_gzip)
    reasons = {f["path"]: f["reason"] for f in report["file_failures"]}
    assert reasons == {str(records): "truncated_record", str(not_gzip): "bad_gzip"}
    assert report["counters"]["interactions_read"] == 4  # The records before the cut.
    message = {f["reason"]: f["message"] for f in report["file_failures"]}["truncated_record"]
    assert "record 5" in message


def test_no_failures_means_an_empty_list_and_an_empty_file(tmp_path):
    path = tmp_path / "interactions.txtpb"
    path.write_bytes(_text_lines(2))
    report = _examples_job(tmp_path, path)
    assert report["file_failures"] == []
    assert (tmp_path / "out" / job.FILE_FAILURES_FILE).read_text() == ""


def test_the_command_fails_on_a_truncated_dump_and_keeps_its_pages(tmp_path):
    """In a fresh process, as a user types it: the design card's script."""
    dump, cut = _truncated_dump(tmp_path)
    page = tmp_path / "pages" / "200-page" / "1.html.gz"
    page.parent.mkdir(parents=True)
    page.write_bytes(b"<html>not gzip</html>")
    out = tmp_path / "out"
    args = ("create-pretrain-data", "--stage=extract", f"--input_dumps={dump}",
            f"--input_pages={tmp_path}/pages/*/*.html.gz", f"--output_dir={out}", "--noprogress_bar")
    failed = run_command(*args)
    assert failed.returncode == 1, failed.stderr
    error = failed.stderr.strip().splitlines()[-1]
    assert error.startswith("tapas-tf create-pretrain-data: error: 2 input file(s) could not be read")
    assert str(dump) in error and "inside the bz2 stream" in error and "files.tsv" in error
    counters = json.loads((out / job.REPORT_FILE).read_text())["counters"]
    assert counters["pages_read"] == 3 + 1  # The dump's pages before the damage, and the page file.
    assert counters["tables_extracted_wikitable"] == 3
    assert counters["files_failed_truncated_bz2"] == 1 and counters["files_failed_bad_gzip"] == 1
    reasons = sorted(line.split("\t")[1] for line in (out / job.FILE_FAILURES_FILE).read_text().splitlines())
    assert reasons == ["bad_gzip", "truncated_bz2"]
    accepted = run_command(*args, "--allow_file_failures")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["files_failed_truncated_bz2"] == 1


def test_create_data_fails_on_a_tfrecord_cut_short_and_reports_it(tmp_path):
    """The task data job: the interactions before the cut are converted, the report names the file
    (`files_failed`, `file_failures`, adds_up false) and the command exits 1 with it."""
    release = tmp_path / "tables"
    records = release / "train.tfrecord"
    interaction_io.write_interactions(str(records), [_interaction(i) for i in range(6)])
    data = records.read_bytes()
    records.write_bytes(data[:len(data) - 30])
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"), ["oslo", "bergen", "city", "people"])
    out = tmp_path / "out"
    failed = run_command("create-data", "--task=SYNTHETIC", f"--input_dir={release}", f"--output_dir={out}",
                         f"--vocab_file={vocab}", "--noprogress_bar")
    assert failed.returncode == 1, failed.stderr
    error = failed.stderr.strip().splitlines()[-2]
    assert error.startswith("tapas-tf create-data: error: 1 input file(s) could not be read to the end")
    assert f"{records}: record 6 is truncated" in error
    split = json.loads((out / "conversion_report.json").read_text())["splits"]["train"]
    assert split["files_failed"] == {"truncated_record": 1} and split["adds_up"] is False
    assert split["file_failures"][0]["path"] == str(records)
    assert split["examples_written"] > 0  # The tables before the cut.
