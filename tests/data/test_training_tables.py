"""The training-data rule on a hand-made release of each kind: every decision and its reason."""

import json

import pytest

from tapas_tf.data.training_tables import (
    REASONS,
    ReleaseFileError,
    Releases,
    TrainingTableRule,
    count_decisions,
)


def write_releases(root) -> Releases:
    """WTQ: training.tsv names tables 1, 2, 3 (3 is in the scored dev split), the release has 1-5.
    SQA: train names 2 and 5 (5 is a WTQ test table). TabFact: train t1, val t2 (caption "Bears
    season"), all_csv t1-t3. Pages: 200-page/1 and 200-page/4 are one article, "Alpha" (4 is an
    evaluation table); 200-page/2 is "Beta"."""
    wtq, sqa, tabfact, pages = root / "wtq", root / "sqa", root / "tabfact", root / "pages"
    (wtq / "csv" / "200-csv").mkdir(parents=True)
    for n in range(1, 6):
        (wtq / "csv" / "200-csv" / f"{n}.csv").write_text("a,b\n1,2\n")
    rows = "".join(f"nt-{n}\tq{n}?\tcsv/200-csv/{n}.csv\tx\n" for n in (1, 2, 3))
    (wtq / "training.tsv").write_text("id\tutterance\tcontext\ttargetValue\n" + rows)
    (wtq / "random-split-1-dev.tsv").write_text("id\tutterance\tcontext\ttargetValue\nnt-3\tq3?\tcsv/200-csv/3.csv\tx\n")
    sqa.mkdir()
    (sqa / "train.tsv").write_text(
        "id\tannotator\tposition\tquestion\ttable_file\tanswer_coordinates\tanswer_text\n"
        "s-2\t0\t0\t\"a question\twith a tab\"\ttable_csv/200_2.csv\t['(0, 0)']\t['1']\n"
        "s-5\t0\t0\tq\ttable_csv/200_5.csv\t['(0, 0)']\t['1']\n")
    (tabfact / "all_csv").mkdir(parents=True)
    for name in ("1-1-1.html.csv", "1-1-2.html.csv", "1-1-3.html.csv"):
        (tabfact / "all_csv" / name).write_text("a#b\n1#2\n")
    (tabfact / "train_examples.json").write_text(json.dumps({"1-1-1.html.csv": [["s"], [1], "alpha games"]}))
    (tabfact / "val_examples.json").write_text(json.dumps({"1-1-2.html.csv": [["s"], [0], "bears season"]}))
    (pages / "200-page").mkdir(parents=True)
    for n, title in ((1, "Alpha"), (4, "Alpha"), (2, "Beta")):
        (pages / "200-page" / f"{n}.json").write_text(json.dumps({"title": title, "tableIndex": 0}))
    return Releases(wtq_dir=str(wtq), sqa_dir=str(sqa), tabfact_dir=str(tabfact), wtq_pages_dir=str(pages))


@pytest.fixture
def rule(tmp_path):
    return TrainingTableRule.from_releases(write_releases(tmp_path))


@pytest.mark.parametrize("table_id, title, reason, manifest_name", [
    ("csv/200-csv/1.csv", "", "kept", "wtq:csv/200-csv/1.csv"),
    ("200-csv/2.csv", "", "kept", "wtq:csv/200-csv/2.csv"),
    ("table_csv/200_2.csv", "", "kept", "sqa:table_csv/200_2.csv"),
    ("csv/200-csv/3.csv", "", "wtq_in_scored_dev_split", None),
    ("csv/200-csv/4.csv", "", "wtq_not_in_training_tsv", None),
    ("table_csv/200_5.csv", "", "wtq_not_in_training_tsv", None),  # SQA train names it; WTQ tests on it.
    ("1-1-1.html.csv", "", "kept", "tabfact:1-1-1.html.csv"),
    ("all_csv/1-1-2.html.csv", "", "tabfact_outside_train", None),
    ("1-1-3.html.csv", "", "tabfact_outside_train", None),  # Neither train nor val: the held-out test.
    ("http://en.wikipedia.org/wiki/Alpha_1", "Alpha", "page_holds_evaluation_table", None),
    ("http://en.wikipedia.org/wiki/Beta_2", "Beta", "kept", "page:200-page/2#2"),
    ("http://en.wikipedia.org/wiki/Bears_season_0", "Bears_season", "page_is_tabfact_evaluation_caption", None),
    ("http://en.wikipedia.org/wiki/Gamma_3", "Gamma", "kept", "page:Gamma#3"),
    ("http://en.wikipedia.org/wiki/Beta_infobox0", "Beta", "kept", "page:200-page/2#infobox0"),
    ("my_own_table", "", "kept", "own:my_own_table"),
])
def test_each_kind_of_table_is_decided_with_its_reason(rule, table_id, title, reason, manifest_name):
    decision = rule.decide(table_id, title)
    assert (decision.kept, decision.reason, decision.manifest_name) == (reason == "kept", reason, manifest_name)


def test_released_tables_without_their_release_cannot_be_kept():
    rule = TrainingTableRule.from_releases(Releases())
    assert rule.decide("csv/200-csv/1.csv").reason == "wtq_release_not_given"
    assert rule.decide("1-1-1.html.csv").reason == "tabfact_release_not_given"
    assert rule.decide("own.csv").kept


def test_the_exclusions_name_every_evaluation_table_and_page(rule):
    assert rule.exclusion_lines() == ["csv/200-csv/3.csv", "csv/200-csv/4.csv", "csv/200-csv/5.csv",
                                      "title:alpha", "title:bears season"]


def test_counts_have_every_reason(rule):
    counts = count_decisions([rule.decide("csv/200-csv/1.csv"), rule.decide("csv/200-csv/4.csv")])
    assert set(counts) == set(REASONS) and counts["kept"] == 1 and counts["wtq_not_in_training_tsv"] == 1


def test_an_unreadable_release_file_names_the_file_and_line(tmp_path):
    releases = write_releases(tmp_path)
    (tmp_path / "tabfact" / "train_examples.json").write_text('{"1-1-1.html.csv": [["s"], [1], "x"],\n  oops}')
    with pytest.raises(ReleaseFileError, match=r"train_examples.json:2: not JSON"):
        TrainingTableRule.from_releases(releases)
    (tmp_path / "wtq" / "training.tsv").write_text("nt-0\tq\tcsv/200-csv/1.csv\tx\n")  # No header.
    with pytest.raises(ReleaseFileError, match=r"training.tsv:1: no 'context' column"):
        TrainingTableRule.from_releases(releases)


def test_collect_tables_applies_the_rule_and_writes_its_report_and_manifest(tmp_path):
    """`tapas-tf collect-tables` with the releases: the kept tables, the report by reason, the
    manifest, and the exclusions for the Wikipedia job agree with the rule."""
    import gzip

    from tapas_tf.data import interaction_io
    from tapas_tf.data.protos.interaction_pb2 import Interaction
    from tests.command_runner import run_command

    releases = write_releases(tmp_path)
    interactions = []
    for table_id, title in (("csv/200-csv/1.csv", ""), ("csv/200-csv/4.csv", ""), ("table_csv/200_2.csv", ""),
                            ("1-1-2.html.csv", ""), ("http://en.wikipedia.org/wiki/Alpha_1", "Alpha"),
                            ("http://en.wikipedia.org/wiki/Beta_2", "Beta")):
        interaction = Interaction(id=f"{table_id}-q")
        interaction.table.table_id, interaction.table.document_title = table_id, title
        interaction.table.columns.add(text="a")
        interactions.append(interaction)
    interaction_io.write_interactions(str(tmp_path / "in.tfrecord"), interactions)
    result = run_command(
        "collect-tables", f"--interactions={tmp_path / 'in.tfrecord'}", f"--wtq_release={releases.wtq_dir}",
        f"--sqa_release={releases.sqa_dir}", f"--tabfact_release={releases.tabfact_dir}",
        f"--wtq_pages={releases.wtq_pages_dir}", f"--output={tmp_path / 'out.tfrecord'}",
        f"--report={tmp_path / 'report.json'}", f"--manifest_out={tmp_path / 'training_tables.txt.gz'}",
        f"--rule_exclusions_out={tmp_path / 'exclude.txt'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Training-data rule: 3 of 6 tables kept" in result.stdout
    kept = [i.table.table_id for i in interaction_io.read_interactions(str(tmp_path / "out.tfrecord"))]
    assert kept == ["csv/200-csv/1.csv", "table_csv/200_2.csv", "http://en.wikipedia.org/wiki/Beta_2"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["tables_used"] == ["page:200-page/2#2", "sqa:table_csv/200_2.csv", "wtq:csv/200-csv/1.csv"]
    assert {k: v for k, v in report["excluded_by_reason"].items() if v} == {
        "kept": 3, "wtq_not_in_training_tsv": 1, "tabfact_outside_train": 1, "page_holds_evaluation_table": 1}
    assert report["tables_excluded"]["csv/200-csv/4.csv"] == "wtq_not_in_training_tsv"
    with gzip.open(tmp_path / "training_tables.txt.gz", "rt") as f:
        assert f.read().split() == report["tables_used"]
    assert (tmp_path / "exclude.txt").read_text().split("\n")[:3] == [
        "csv/200-csv/3.csv", "csv/200-csv/4.csv", "csv/200-csv/5.csv"]

