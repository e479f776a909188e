"""A stopped and resumed run continues exactly as if it had never stopped: the learning-rate
schedule, and the data order (every step reads the batch an uninterrupted run reads there).

The tiny model of tests/training/test_trainer.py (dropout off, float32) trains on the eight fixture
examples of tests/training/test_input_pipeline.py, written at max_seq_length 32, in shuffled batches
of two from two length buckets (16 and 32 tokens; the real lengths are 15-18). Run A trains 6 steps
uninterrupted; run B stops after its checkpoint of step 3 and is resumed to step 6.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import logging  # noqa: E402
import shutil  # noqa: E402
from typing import Dict  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.training import distribution, input_pipeline, trainer as training  # noqa: E402
from tests.training.test_input_pipeline import (  # noqa: E402
    NUM_EXAMPLES,
    _question_ids,
    write_fixture_examples,
)
from tests.training.test_trainer import tiny_configs  # noqa: E402

SEQ = 32
BUCKETS = (16,)  # Buckets 16 and 32.
BATCH = 2
STEPS = 6
STOP = 3  # B's last step before it stops; it has a checkpoint.
SEED = 1
CHECKED = ("total_loss", "selection_loss", "learning_rate", "gradient_norm")


def _configs(data: str, **options):
    # Warm-up over the first half, then decay: every step has another learning rate.
    values = dict(max_seq_length=SEQ, train_steps=STEPS, train_batch_size=BATCH, warmup_ratio=0.5,
                  shuffle_buffer=NUM_EXAMPLES, bucket_lengths=BUCKETS, save_checkpoints_steps=STOP,
                  seed=SEED)
    values.update(options)
    return tiny_configs(data, **values)


class _Stopped(Exception):
    """Raised by the step callback to stop a run, as a stop or kill would."""


def _train(model_config, train_config, model_dir: str, stop_after: int = 0) -> Dict[int, Dict[str, float]]:
    """Trains (or resumes) in `model_dir`; {step: the step's values}. With `stop_after`, stops the
    run after that step (and its checkpoint)."""
    values = {}

    def on_step_end(step, step_values):
        values[step] = step_values
        if step == stop_after:
            raise _Stopped()

    try:
        training.train(model_config, train_config, model_dir, distribution.get_strategy("one_device"),
                       on_step_end=on_step_end)
    except _Stopped:
        pass
    return values


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("data")
    write_fixture_examples(directory, max_seq_length=SEQ)
    return str(directory / "tf_examples" / "train.tfrecord")


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory):
    """Run A: {step: values} of STEPS uninterrupted steps, and its model directory."""
    model_dir = str(tmp_path_factory.mktemp("uninterrupted"))
    values = _train(*_configs(data), model_dir)
    assert sorted(values) == list(range(1, STEPS + 1))
    return values, model_dir


@pytest.fixture(scope="module")
def stopped(data, tmp_path_factory):
    """Run B, stopped after step STOP: {step: values} and its model directory (copy it to resume)."""
    model_dir = str(tmp_path_factory.mktemp("stopped") / "model")
    values = _train(*_configs(data), model_dir, stop_after=STOP)
    assert sorted(values) == list(range(1, STOP + 1))
    assert model_dir_lib.latest_checkpoint(model_dir).endswith(f"ckpt-{STOP}")
    return values, model_dir


def _resume(data, stopped_dir: str, tmp_path, **options) -> Dict[int, Dict[str, float]]:
    model_dir = str(shutil.copytree(stopped_dir, tmp_path / "resumed"))
    values = _train(*_configs(data, **options), model_dir)
    assert sorted(values) == list(range(STOP + 1, STEPS + 1))
    return values


def _checkpoint_tensors(model_dir: str) -> Dict[str, np.ndarray]:
    """Every variable of the newest checkpoint: the model, Adam's slots and iterations, the step."""
    reader = tf.train.load_checkpoint(model_dir_lib.latest_checkpoint(model_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def test_the_seeded_data_order_mixes_buckets_and_reshuffles_each_epoch(data):
    """What makes the order matter here: each step reads other examples, of either bucket."""
    tf.random.set_seed(SEED)  # As `train` does: the shuffle's seeds depend on the global seed too.
    dataset = input_pipeline.make_dataset(data, SEQ, BATCH, training=True, shuffle_buffer=NUM_EXAMPLES,
                                          seed=SEED, bucket_lengths=BUCKETS)
    batches = list(dataset.take(2 * NUM_EXAMPLES // BATCH))  # Two epochs.
    assert {batch["input_ids"].shape[1] for batch in batches[:STEPS]} == {16, 32}
    ids = [tuple(_question_ids(batch)) for batch in batches]
    assert len(set(ids[:STEPS])) == STEPS
    assert ids[STOP] != ids[0]  # Replaying from the start would train step 4 on other examples.
    assert ids[:4] != ids[4:]  # The second epoch is shuffled anew.


@pytest.mark.parametrize("bucket_lengths", [(), BUCKETS], ids=["one_length", "buckets"])
def test_seeded_datasets_repeat_their_batches_and_skip_the_first_ones(data, bucket_lengths):
    def batch_ids(skip_batches=0, seed=SEED, count=12):
        tf.random.set_seed(SEED)
        dataset = input_pipeline.make_dataset(data, SEQ, BATCH, training=True, shuffle_buffer=NUM_EXAMPLES,
                                              seed=seed, bucket_lengths=bucket_lengths,
                                              skip_batches=skip_batches)
        return [(batch["input_ids"].shape[1], tuple(_question_ids(batch))) for batch in dataset.take(count)]

    sequence = batch_ids(count=17)
    assert batch_ids() == sequence[:12]  # The same over several epochs, every time it is made.
    assert batch_ids(skip_batches=5) == sequence[5:17]
    assert batch_ids(seed=SEED + 1) != sequence[:12]
    with pytest.raises(ValueError, match="skip_batches must be >= 0"):
        batch_ids(skip_batches=-1)


class _Strategy:
    """Stands in for a strategy whose input pipeline `pipeline_id` of `pipelines` feeds
    replicas / pipelines of its `replicas`."""

    def __init__(self, replicas: int, pipelines: int = 1, pipeline_id: int = 0):
        self.num_replicas_in_sync = replicas
        self.context = tf.distribute.InputContext(
            num_input_pipelines=pipelines, input_pipeline_id=pipeline_id, num_replicas_in_sync=replicas)

    def distribute_datasets_from_function(self, dataset_fn):
        return dataset_fn(self.context)


@pytest.mark.parametrize("replicas, pipelines, seed, shuffle_buffer, skipped", [
    (1, 1, SEED, NUM_EXAMPLES, 3),
    (2, 1, SEED, NUM_EXAMPLES, 6),  # Two replicas on one worker: two batches a step.
    (4, 2, SEED, NUM_EXAMPLES, 6),  # Two workers of two replicas.
    (1, 1, None, 1, 3),  # No seed, but no shuffle either: file order replays.
    (1, 1, None, NUM_EXAMPLES, 0),  # A random order: nothing to replay.
])
def test_each_pipeline_skips_a_batch_per_replica_and_step(data, monkeypatch, caplog, replicas,
                                                          pipelines, seed, shuffle_buffer, skipped):
    calls = []
    monkeypatch.setattr(input_pipeline, "make_dataset", lambda *args, **kwargs: calls.append(kwargs))
    _, config = _configs(data, seed=seed, shuffle_buffer=shuffle_buffer)
    with caplog.at_level(logging.INFO):
        training._distributed_dataset(_Strategy(replicas, pipelines), config, BATCH, start_step=STOP)
    assert [(call["seed"], call["skip_batches"]) for call in calls] == [(seed, skipped)]
    messages = [record.getMessage() for record in caplog.records]
    if skipped:
        assert messages == [f"Resuming at step {STOP}: each input pipeline skips its first {skipped} batches "
                            f"({skipped * BATCH} examples) to continue the data order of the run."]
    else:
        assert len(messages) == 1 and messages[0].startswith(f"Resuming at step {STOP} without a seed")

    calls.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO):  # A run from the start skips nothing, and says nothing.
        training._distributed_dataset(_Strategy(replicas, pipelines), config, BATCH, start_step=0)
    assert [(call["seed"], call["skip_batches"]) for call in calls] == [(seed, 0)]
    assert not caplog.records


def test_resumed_run_continues_exactly_as_the_uninterrupted_run(data, uninterrupted, stopped, tmp_path):
    expected, uninterrupted_dir = uninterrupted
    before, stopped_dir = stopped
    for step in range(1, STOP + 1):  # The same run up to the stop.
        for key in CHECKED:
            np.testing.assert_allclose(before[step][key], expected[step][key], rtol=1e-5, err_msg=(step, key))

    resumed = _resume(data, stopped_dir, tmp_path)
    rates = [resumed[step]["learning_rate"] for step in range(STOP + 1, STEPS + 1)]
    assert len(set(rates)) == len(rates) and min(rates) > 0  # The schedule moves at every step.
    for step in range(STOP + 1, STEPS + 1):
        for key in CHECKED:
            np.testing.assert_allclose(resumed[step][key], expected[step][key], rtol=1e-5,
                                       err_msg=(step, key))

    final = _checkpoint_tensors(str(tmp_path / "resumed"))
    reference = _checkpoint_tensors(uninterrupted_dir)
    assert sorted(final) == sorted(reference)
    assert final["step/.ATTRIBUTES/VARIABLE_VALUE"] == STEPS
    assert sum("OPTIMIZER_SLOT" in name for name in final) > 10
    for name, value in reference.items():
        np.testing.assert_allclose(final[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("reseed", [True, False], ids=["reseeded_at_resume", "not_skipped"])
def test_a_resume_that_reads_other_batches_would_fail_the_comparison(data, uninterrupted, stopped, tmp_path,
                                                                    monkeypatch, reseed):
    """The comparison sees the data order: the old resume (the shuffle reseeded with seed + step,
    nothing skipped), or one that reads the sequence from its start, trains step 4 on other
    examples and gets another loss."""
    expected, _ = uninterrupted
    make_dataset = input_pipeline.make_dataset

    def old_make_dataset(*args, seed=None, skip_batches=0, **kwargs):
        assert skip_batches == STOP  # What the resume asks for; ignored here.
        return make_dataset(*args, seed=seed + STOP if reseed else seed, **kwargs)

    monkeypatch.setattr(input_pipeline, "make_dataset", old_make_dataset)
    resumed = _resume(data, stopped[1], tmp_path)
    first = STOP + 1
    assert resumed[first]["learning_rate"] == pytest.approx(expected[first]["learning_rate"], rel=1e-6)
    assert abs(resumed[first]["total_loss"] - expected[first]["total_loss"]) > 1e-3, (
        resumed[first]["total_loss"], expected[first]["total_loss"])
    assert max(abs(resumed[step]["total_loss"] - expected[step]["total_loss"])
               for step in range(first, STEPS + 1)) > 1e-2
