"""The one model loader (`tapas_tf.checkpoints.model_dir`): which checkpoint, which model, which step.

A tiny model directory with checkpoints at steps 1 and 2 whose weights differ (every variable of
ckpt-2 is ckpt-1's plus 1), then damaged as a lost file would damage it.
"""

import logging
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.inference import sequential  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402

DATA = ".data-00000-of-00001"


def _weights(model) -> dict:
    return {name: variable.numpy() for name, variable in model.weight_map().items()}


@pytest.fixture
def two_checkpoints(tmp_path):
    """(model directory, {step: the weights its checkpoint holds})."""
    directory = str(tmp_path / "model")
    config = tiny_config()
    tf_keras.utils.set_random_seed(5)
    model = model_dir_lib.build_model(config)
    model_dir_lib.save_config(directory, config)
    write_test_vocab(os.path.join(directory, "vocab.txt"))
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step),
                                         model_dir_lib.checkpoint_dir(directory), max_to_keep=5)
    saved = {}
    for number in (1, 2):
        if number == 2:
            for variable in model.weight_map().values():
                variable.assign_add(tf.ones_like(variable))
        step.assign(number * 10)  # The step variable, not the prefix's number, is the step.
        manager.save(checkpoint_number=number)
        saved[number] = _weights(model)
    return directory, saved


def _prefix(directory: str, number: int) -> str:
    return os.path.join(model_dir_lib.checkpoint_dir(directory), f"ckpt-{number}")


def _assert_weights(model, expected: dict) -> None:
    restored = _weights(model)
    assert sorted(restored) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)


def test_the_newest_checkpoint_is_loaded_without_a_warning(two_checkpoints, caplog):
    directory, saved = two_checkpoints
    with caplog.at_level(logging.WARNING):
        assert model_dir_lib.latest_checkpoint(directory) == _prefix(directory, 2)
        _assert_weights(model_dir_lib.load_model(directory), saved[2])
    assert not caplog.records
    assert model_dir_lib.weights_step(directory, model_dir_lib.resolve_weights(directory)) == 20


@pytest.mark.parametrize("lost", [".index", DATA])
def test_a_newest_checkpoint_that_lost_a_file_is_passed_over_with_a_warning(two_checkpoints, caplog, lost):
    directory, saved = two_checkpoints
    newest, older = _prefix(directory, 2), _prefix(directory, 1)
    os.remove(newest + lost)
    if lost == ".index":
        # What predict and export used to read: TensorFlow alone finds no checkpoint at all.
        assert tf.train.latest_checkpoint(model_dir_lib.checkpoint_dir(directory)) is None
        caplog.clear()  # TensorFlow's own error line.
    with caplog.at_level(logging.WARNING):
        assert model_dir_lib.latest_checkpoint(directory) == older
    assert [record.getMessage() for record in caplog.records] == [
        f"Skipping checkpoint {newest}: its file ckpt-2{lost} is missing.",
        f"Using the older checkpoint {older} instead."]
    # Predict (resolve_weights, weights_step, load_model), export (load_model) and TableQA all
    # read the older one.
    checkpoint = model_dir_lib.resolve_weights(directory)
    assert (checkpoint, model_dir_lib.weights_step(directory, checkpoint)) == (older, 10)
    _assert_weights(model_dir_lib.load_model(directory), saved[1])
    qa = TableQA.from_model_dir(directory, backend="tensorflow")
    for name, value in saved[1].items():
        np.testing.assert_array_equal(qa.model.weight_map()[name].numpy(), value, err_msg=name)


def test_without_the_state_file_the_highest_numbered_checkpoint_is_found(two_checkpoints):
    directory, saved = two_checkpoints
    os.remove(os.path.join(model_dir_lib.checkpoint_dir(directory), "checkpoint"))
    assert model_dir_lib.latest_checkpoint(directory) == _prefix(directory, 2)
    _assert_weights(model_dir_lib.load_model(directory), saved[2])


def test_no_complete_checkpoint_and_no_compact_weights_is_an_error(two_checkpoints):
    directory, _ = two_checkpoints
    for number in (1, 2):
        os.remove(_prefix(directory, number) + ".index")
    assert model_dir_lib.latest_checkpoint(directory) is None
    message = (f"{directory}: no checkpoint under checkpoints/ and no weights_float16.npz or "
               "weights_int8.npz")
    with pytest.raises(FileNotFoundError, match=f"^{message}$"):
        model_dir_lib.load_model(directory)
    with pytest.raises(FileNotFoundError, match=f"^{message}$"):
        model_dir_lib.resolve_weights(directory)


def test_a_newest_checkpoint_whose_files_are_there_but_damaged_is_an_error_not_skipped(two_checkpoints):
    directory, _ = two_checkpoints
    newest = _prefix(directory, 2)
    with open(newest + DATA, "r+b") as f:
        f.truncate(10)
    assert model_dir_lib.latest_checkpoint(directory) == newest
    with pytest.raises(model_dir_lib.CorruptCheckpointError,
                       match=f"^checkpoint {newest} is truncated or corrupt .*pass another --checkpoint$"):
        model_dir_lib.load_model(directory)


def test_checkpoint_step_is_one_function(two_checkpoints):
    directory, _ = two_checkpoints
    assert sequential.checkpoint_step is model_dir_lib.checkpoint_step
    assert model_dir_lib.checkpoint_step(_prefix(directory, 1)) == 10
    bare = tf.train.Checkpoint(x=tf.Variable(1.0)).write(os.path.join(directory, "other", "weights-7"))
    assert model_dir_lib.checkpoint_step(bare) == 7  # No step variable: the prefix's number.


def test_a_masked_lm_directory_loads_only_as_a_masked_lm(tmp_path):
    directory = str(tmp_path / "pretrained")
    config = tiny_config()
    model = model_dir_lib.build_model(config, model_dir_lib.MASKED_LM)
    assert type(model).__name__ == "TapasForMaskedLM"
    model_dir_lib.save_config(directory, config)
    model_dir_lib.save_model_kind(directory, model_dir_lib.MASKED_LM)
    tf.train.Checkpoint(model=model).save(os.path.join(model_dir_lib.checkpoint_dir(directory), "ckpt"))

    _assert_weights(model_dir_lib.load_model(directory, kind=model_dir_lib.MASKED_LM), _weights(model))
    refused = f"^{directory} holds a pre-trained masked-LM model, not a question-answering one; fine-tune"
    with pytest.raises(ValueError, match=refused):
        model_dir_lib.load_model(directory)
    # Asking skipped the kind check: it failed later, with TensorFlow's AssertionError on unbound heads.
    with pytest.raises(ValueError, match=refused):
        TableQA.from_model_dir(directory, backend="tensorflow")
