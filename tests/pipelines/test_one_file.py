"""WriteToOneFile: many bundles of records -> one file, the same records, no shards left behind."""

import os

import apache_beam as beam
import pytest
import tensorflow as tf
from apache_beam.testing import test_pipeline

from tapas_tf.pipelines import one_file


def _files(directory):
    return sorted(os.listdir(directory))


def test_tfrecord_records_of_every_shard_end_in_one_file(tmp_path):
    path = str(tmp_path / "train.tfrecord")
    records = [f"record {i}".encode() for i in range(300)]
    with test_pipeline.TestPipeline() as p:
        # The in-process DirectRunner writes these as one shard; joining several is checked by
        # test_concatenate_shards_in_name_order_and_deletes_them.
        _ = (p | beam.Create(records) | beam.Reshuffle() | one_file.WriteToOneFile(path))
    assert _files(tmp_path) == ["train.tfrecord"]
    written = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert sorted(written) == sorted(records)


def test_text_header_first_then_every_line(tmp_path):
    path = str(tmp_path / "failures.tsv")
    lines = [f"file\t{i}\treason" for i in range(50)]
    with test_pipeline.TestPipeline() as p:
        _ = (p | beam.Create(lines) | beam.Reshuffle()
             | one_file.WriteToOneFile(path, kind=one_file.TEXT, header="file\tline\treason"))
    assert _files(tmp_path) == ["failures.tsv"]
    with open(path) as f:
        written = f.read().splitlines()
    assert written[0] == "file\tline\treason"
    assert sorted(written[1:]) == sorted(lines)


def test_no_records_gives_an_empty_file_or_the_header_alone(tmp_path):
    records_path, text_path = str(tmp_path / "empty.tfrecord"), str(tmp_path / "empty.tsv")
    with test_pipeline.TestPipeline() as p:
        empty = p | "Nothing" >> beam.Create([], reshuffle=False).with_output_types(bytes)
        _ = empty | "Records" >> one_file.WriteToOneFile(records_path)
        _ = (empty | "Decode" >> beam.Map(bytes.decode)
             | "Lines" >> one_file.WriteToOneFile(text_path, kind=one_file.TEXT, header="h1\th2"))
    assert _files(tmp_path) == ["empty.tfrecord", "empty.tsv"]
    assert os.path.getsize(records_path) == 0
    with open(text_path) as f:
        assert f.read() == "h1\th2\n"


def test_an_earlier_file_is_replaced(tmp_path):
    path = tmp_path / "dev.tfrecord"
    path.write_bytes(b"left from an earlier run")
    with test_pipeline.TestPipeline() as p:
        _ = p | beam.Create([b"a", b"b"]) | one_file.WriteToOneFile(str(path))
    assert sorted(r.numpy() for r in tf.data.TFRecordDataset(str(path))) == [b"a", b"b"]


def test_concatenate_shards_in_name_order_and_deletes_them(tmp_path):
    shards = []
    for index, text in enumerate(["one\n", "two\n", "three\n"]):
        shard = tmp_path / f"out.tsv.part-{index:05d}-of-00003"
        shard.write_text(text)
        shards.append(str(shard))
    destination = str(tmp_path / "out.tsv")
    assert one_file.concatenate_shards(reversed(shards), destination, header="h") == destination
    assert _files(tmp_path) == ["out.tsv"]
    with open(destination) as f:
        assert f.read() == "h\none\ntwo\nthree\n"


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="kind must be"):
        one_file.WriteToOneFile("x", kind="csv")
    with pytest.raises(ValueError, match="only for text"):
        one_file.WriteToOneFile("x", header="h")
