"""tf.data input: parsing, batching, shuffling, sharding and the early checks on bad files.

The fixture examples come from the real converter: three small tables, eight questions,
max_seq_length 64. Their answer cells (body row, column):

    people: name | age             cities: city | country         medals: nation | gold
      john  | 10                     paris  | france              france  | 3
      mary  | 20                     berlin | germany             germany | 5
      smith | 30                     london | england             england | 7
    q0 who is 20?            (1,0)   q3 which city is in france?  (0,0)   q6 who won 5 gold?   (1,0)
    q1 what age is john?     (0,1)   q4 what country is berlin in? (1,1)  q7 how many gold did
    q2 who is 30?            (2,0)   q5 which city is in england? (2,0)      england win?      (2,1)
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Dict, List  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.features import example_features  # noqa: E402
from tapas_tf.task_registry.presets import Task  # noqa: E402
from tapas_tf.training import input_pipeline  # noqa: E402
from tapas_tf.training.config import DEFAULT_BUCKET_LENGTHS, train_config_for_task  # noqa: E402
from tests.conversion_fixtures import make_converter, make_interaction  # noqa: E402

SEQ = 64
TABLES = (
    (["name", "age"], [["john", "10"], ["mary", "20"], ["smith", "30"]],
     [("who is 20?", [(1, 0)]), ("what age is john?", [(0, 1)]), ("who is 30?", [(2, 0)])]),
    (["city", "country"], [["paris", "france"], ["berlin", "germany"], ["london", "england"]],
     [("which city is in france?", [(0, 0)]), ("what country is berlin in?", [(1, 1)]),
      ("which city is in england?", [(2, 0)])]),
    (["nation", "gold"], [["france", "3"], ["germany", "5"], ["england", "7"]],
     [("who won 5 gold?", [(1, 0)]), ("how many gold did england win?", [(2, 1)])]),
)
NUM_EXAMPLES = 8


def write_fixture_examples(directory, max_seq_length: int = SEQ) -> List[Dict[str, object]]:
    """Converts the eight TABLES questions, writes DIR/tf_examples/train.tfrecord, returns the features."""
    converter = make_converter(str(directory), max_seq_length=max_seq_length)
    examples = []
    for t, (header, rows, questions) in enumerate(TABLES):
        interaction = make_interaction(header, rows, questions, table_id=f"table_{t}")
        interaction.id = f"i{t}"
        for q in range(len(questions)):
            interaction.questions[q].id = f"i{t}_{q}"
            examples.append(converter.convert(interaction, q).features)
    os.makedirs(os.path.join(directory, "tf_examples"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(directory, "tf_examples", "train.tfrecord")) as writer:
        for features in examples:
            writer.write(example_features.to_tf_example(features).SerializeToString())
    return examples


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    directory = tmp_path_factory.mktemp("examples")
    examples = write_fixture_examples(directory)
    return str(directory / "tf_examples" / "train.tfrecord"), examples


def _question_ids(batch) -> List[str]:
    return [example_features.ints_to_question_id(codes) for codes in batch["question_id_ints"].numpy()]


def test_parsed_batch_has_model_dtypes_shapes_and_values(fixture):
    path, examples = fixture
    batch = next(iter(input_pipeline.make_dataset(path, SEQ, batch_size=3, training=False)))
    assert batch["input_ids"].dtype == tf.int32 and batch["input_ids"].shape == (3, SEQ)
    assert batch["label_ids"].dtype == tf.int32 and batch["label_ids"].shape == (3, SEQ)
    assert batch["numeric_values"].dtype == tf.float32 and batch["numeric_values"].shape == (3, SEQ)
    assert batch["aggregation_function_id"].dtype == tf.int32 and batch["aggregation_function_id"].shape == (3,)
    assert batch["answer"].dtype == tf.float32 and batch["answer"].shape == (3,)
    assert batch["question_id_ints"].shape == (3, example_features.QUESTION_ID_INTS_LENGTH)
    assert "question_id" not in batch and "table_id" not in batch  # No strings (TPU).
    assert _question_ids(batch) == ["i0_0", "i0_1", "i0_2"]
    for i in range(3):
        for name in ("input_ids", "input_mask", "segment_ids", "column_ids", "row_ids", "prev_label_ids",
                     "label_ids", "numeric_relations"):
            np.testing.assert_array_equal(batch[name][i].numpy(), examples[i][name])
    # "who is 20?": exactly the tokens of cell (row 2, column 1) ("mary") are labelled.
    first = batch["label_ids"][0].numpy()
    assert first.sum() == 1
    assert batch["row_ids"][0].numpy()[first == 1].tolist() == [2]
    assert batch["column_ids"][0].numpy()[first == 1].tolist() == [1]
    # The second question's prev_label_ids marks the first question's answer, "mary".
    previous = batch["prev_label_ids"][1].numpy() == 1
    assert batch["row_ids"][1].numpy()[previous].tolist() == [2]
    assert batch["column_ids"][1].numpy()[previous].tolist() == [1]


def test_evaluation_is_one_pass_in_file_order_with_a_short_last_batch(fixture):
    path, _ = fixture
    batches = list(input_pipeline.make_dataset(path, SEQ, batch_size=3, training=False))
    assert [len(b["input_ids"]) for b in batches] == [3, 3, 2]
    assert sum((_question_ids(b) for b in batches), [])[-2:] == ["i2_0", "i2_1"]


def test_training_repeats_and_drops_the_remainder_for_static_shapes(fixture):
    path, _ = fixture
    dataset = input_pipeline.make_dataset(path, SEQ, batch_size=3, training=True, shuffle_buffer=1)
    assert dataset.element_spec["input_ids"].shape == (3, SEQ)
    assert dataset.element_spec["answer"].shape == (3,)
    ids = sum((_question_ids(b) for b in dataset.take(4)), [])
    # File order without shuffling, wrapping around after the eighth example.
    assert ids[7:10] == ["i2_1", "i0_0", "i0_1"]


def test_shuffle_is_seeded(fixture):
    path, _ = fixture

    def order(seed):
        dataset = input_pipeline.make_dataset(path, SEQ, batch_size=NUM_EXAMPLES, training=True,
                                              shuffle_buffer=100, seed=seed)
        return _question_ids(next(iter(dataset)))

    first = order(3)
    assert first == order(3)
    assert sorted(first) == sorted(f"i{t}_{q}" for t, (_, _, qs) in enumerate(TABLES) for q in range(len(qs)))
    assert first != sorted(first) or order(4) != first


def test_pipelines_of_several_workers_read_disjoint_shares(fixture):
    path, _ = fixture
    shares = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        dataset = input_pipeline.make_dataset(path, SEQ, batch_size=4, training=False, input_context=context)
        shares.append(sum((_question_ids(b) for b in dataset), []))
    # One file for two workers: records alternate.
    assert shares == [["i0_0", "i0_2", "i1_1", "i2_0"], ["i0_1", "i1_0", "i1_2", "i2_1"]]


def test_missing_file_is_named(tmp_path):
    pattern = str(tmp_path / "nothing" / "train*.tfrecord")
    with pytest.raises(FileNotFoundError, match="nothing/train"):
        input_pipeline.make_dataset(pattern, SEQ, batch_size=2, training=True)


def test_other_sequence_length_is_named_with_both_lengths(fixture):
    path, _ = fixture
    with pytest.raises(ValueError, match=r"train.tfrecord: examples have 64 tokens, but max_seq_length is 128"):
        input_pipeline.check_examples(path, 128)


def test_empty_and_foreign_files_are_rejected(tmp_path):
    empty = str(tmp_path / "empty.tfrecord")
    with tf.io.TFRecordWriter(empty):
        pass
    with pytest.raises(ValueError, match="empty.tfrecord holds no examples"):
        input_pipeline.check_examples(empty, SEQ)

    foreign = str(tmp_path / "foreign.tfrecord")
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * SEQ))}))
    with tf.io.TFRecordWriter(foreign) as writer:
        writer.write(example.SerializeToString())
    with pytest.raises(ValueError, match="foreign.tfrecord: examples lack the classifier features input_mask"):
        input_pipeline.check_examples(foreign, SEQ)

    text = tmp_path / "text.tfrecord"
    text.write_text("not a record file at all\n" * 10)
    with pytest.raises(ValueError, match="text.tfrecord"):
        input_pipeline.check_examples(str(text), SEQ)


def test_damaged_file_is_named(fixture, tmp_path):
    path, _ = fixture
    data = open(path, "rb").read()
    # Cut short after its first record: the early check passes, and reading it later fails.
    truncated = tmp_path / "train-00001.tfrecord"
    truncated.write_bytes(data[:-20])
    (tmp_path / "train-00000.tfrecord").write_bytes(data)
    pattern = str(tmp_path / "train-*.tfrecord")
    assert len(input_pipeline.check_examples(pattern, SEQ)) == 2
    with pytest.raises(tf.errors.DataLossError) as raised:
        list(input_pipeline.make_dataset(pattern, SEQ, batch_size=4, training=False))
    error = input_pipeline.damaged_file_error(pattern, raised.value)
    assert isinstance(error, input_pipeline.DamagedDataError)
    assert str(error).startswith(f"{truncated} is truncated or corrupt (truncated record at ")
    # Cut inside its first record: the early check names it.
    (tmp_path / "train-00000.tfrecord").write_bytes(data[:30])
    with pytest.raises(input_pipeline.DamagedDataError, match=r"train-00000.tfrecord is not a TFRecord file, "
                       r"or is truncated or corrupt \(truncated record at 0\)"):
        input_pipeline.check_examples(pattern, SEQ)


def test_batch_size_must_be_positive(fixture):
    path, _ = fixture
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        input_pipeline.make_dataset(path, SEQ, batch_size=0, training=True)


def test_default_buckets_are_every_64_tokens_up_to_the_sequence_length():
    assert train_config_for_task(Task.SQA, "train.tfrecord").bucket_lengths == DEFAULT_BUCKET_LENGTHS
    assert input_pipeline.effective_buckets(DEFAULT_BUCKET_LENGTHS, 512) == (64, 128, 192, 256, 320, 384, 448, 512)
    assert input_pipeline.effective_buckets(DEFAULT_BUCKET_LENGTHS, 128) == (64, 128)
    assert input_pipeline.effective_buckets(DEFAULT_BUCKET_LENGTHS, 100) == (64, 100)  # The longest fit too.
    assert input_pipeline.effective_buckets(DEFAULT_BUCKET_LENGTHS, 64) == (64,)


def test_length_buckets_group_examples_and_cut_only_token_features(fixture):
    path, _ = fixture
    # Real lengths of the fixture: 15-16 (four examples) and 17-18 (four); buckets 16, 32, 64.
    assert input_pipeline.effective_buckets((32, 16, 128), SEQ) == (16, 32, SEQ)
    assert input_pipeline.effective_buckets((), SEQ) == ()
    dataset = input_pipeline.make_dataset(path, SEQ, 2, training=True, shuffle_buffer=8, seed=3,
                                          bucket_lengths=(16, 32))
    assert dataset.element_spec["input_ids"].shape.as_list() == [2, None]
    full = next(iter(input_pipeline.make_dataset(path, SEQ, NUM_EXAMPLES, training=False)))
    by_id = {tuple(q): i for i, q in enumerate(full["question_id_ints"].numpy())}
    seen = []
    for batch in dataset.take(8):  # Two passes over the data.
        lengths = batch["input_mask"].numpy().sum(axis=1)
        width = batch["input_ids"].shape[1]
        assert width == (16 if lengths.max() <= 16 else 32)
        assert lengths.min() > (0 if width == 16 else 16)  # One bucket per batch.
        for name, value in batch.items():
            expected = [width] if name in input_pipeline.TOKEN_FEATURES else full[name].shape[1:]
            assert value.shape[0] == 2 and value.shape[1:] == expected, name
        for row, ids in enumerate(batch["question_id_ints"].numpy()):
            i = by_id[tuple(ids)]
            seen.append(i)
            for name in input_pipeline.TOKEN_FEATURES:  # Only padding was cut.
                np.testing.assert_array_equal(batch[name][row].numpy(), full[name][i, :width].numpy())
                assert not full["input_mask"][i, width:].numpy().any()
    assert sorted(seen) == sorted(list(range(NUM_EXAMPLES)) * 2)
