"""Resuming from the newest checkpoint that reads completely (`tapas_tf.training.recovery`).

A two-variable tf.train.Checkpoint saved by a CheckpointManager at steps 1, 2 and 3 (its variable
holds the step), then damaged as a kill, a full disk or a lost file would damage it.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import logging  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.training import recovery  # noqa: E402


def _checkpoint(value: float = -1.0) -> tf.train.Checkpoint:
    return tf.train.Checkpoint(value=tf.Variable(value), step=tf.Variable(int(value), dtype=tf.int64))


def _save(directory: str, steps=(1, 2, 3)) -> None:
    checkpoint = _checkpoint()
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=5)
    for step in steps:
        checkpoint.value.assign(float(step))
        checkpoint.step.assign(step)
        manager.save(checkpoint_number=step)


def _restored(directory: str):
    """(prefix restored, the value restored), and the checkpoint."""
    checkpoint = _checkpoint()
    prefix = recovery.restore_newest(checkpoint, directory)
    return (os.path.basename(prefix) if prefix else None, float(checkpoint.value.numpy())), checkpoint


def _cut(path: str, keep_bytes: int) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:keep_bytes])


def _flip_last_byte(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.fixture
def saved(tmp_path) -> str:
    directory = str(tmp_path / "checkpoints")
    _save(directory)
    return directory


def test_the_newest_checkpoint_is_restored_and_nothing_is_logged(saved, caplog):
    with caplog.at_level(logging.WARNING):
        (prefix, value), checkpoint = _restored(saved)
    assert (prefix, value, int(checkpoint.step.numpy())) == ("ckpt-3", 3.0, 3)
    assert not caplog.records
    assert recovery.named_checkpoints(saved) == [os.path.join(saved, f"ckpt-{n}") for n in (3, 2, 1)]


def test_an_empty_or_missing_directory_has_nothing_to_resume(tmp_path):
    assert _restored(str(tmp_path / "none"))[0] == (None, -1.0)


@pytest.mark.parametrize("damage", ["no_index", "index_cut", "data_cut", "data_flipped"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before_with_a_warning(saved, caplog, damage):
    newest = os.path.join(saved, "ckpt-3")
    if damage == "no_index":
        os.remove(newest + ".index")
        # TensorFlow alone finds no checkpoint at all here: a run would start over from step 0.
        assert tf.train.latest_checkpoint(saved) is None
        caplog.clear()  # TensorFlow's own error line.
    elif damage == "index_cut":
        _cut(newest + ".index", 20)
    elif damage == "data_cut":
        _cut(newest + ".data-00000-of-00001", 3)
    else:
        _flip_last_byte(newest + ".data-00000-of-00001")  # The step's bytes: the checksum fails.
    with caplog.at_level(logging.WARNING):
        (prefix, value), checkpoint = _restored(saved)
    assert (prefix, value, int(checkpoint.step.numpy())) == ("ckpt-2", 2.0, 2)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith(f"Skipping a checkpoint that does not read completely: checkpoint {newest}")
    assert messages[1] == (f"Resuming from the older checkpoint {os.path.join(saved, 'ckpt-2')} instead; "
                           "the steps after it are trained again.")


def test_without_the_state_file_the_highest_numbered_checkpoint_is_found(saved):
    os.remove(os.path.join(saved, "checkpoint"))
    assert _restored(saved)[0] == ("ckpt-3", 3.0)


def test_a_save_cut_off_before_it_was_named_is_not_resumed_from_and_its_leftovers_go(saved):
    """What a kill in the save of step 4 leaves: its files (the .index half written), a temporary
    directory and a temporary state file; the state file still names ckpt-3."""
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(os.path.join(saved, "ckpt-3" + suffix), os.path.join(saved, "ckpt-4" + suffix))
    _cut(os.path.join(saved, "ckpt-4.index"), 10)
    os.makedirs(os.path.join(saved, "ckpt-4_temp"))
    open(os.path.join(saved, "ckpt-4_temp", "part-00000-of-00001.data-00000-of-00001"), "w").close()
    open(os.path.join(saved, "checkpoint.tmp0123abcd"), "w").close()

    assert _restored(saved)[0] == ("ckpt-3", 3.0)
    removed = recovery.remove_partial_saves(saved)
    assert sorted(os.path.basename(path) for path in removed) == ["checkpoint.tmp0123abcd", "ckpt-4_temp"]
    assert sorted(os.listdir(saved)) == sorted(["checkpoint"] + [
        f"ckpt-{n}{suffix}" for n in (1, 2, 3, 4) for suffix in (".index", ".data-00000-of-00001")])


def test_no_readable_named_checkpoint_is_an_error_naming_each(saved):
    for step in (1, 2, 3):
        _cut(os.path.join(saved, f"ckpt-{step}.index"), 20)
    with pytest.raises(model_dir_lib.CorruptCheckpointError) as raised:
        _restored(saved)
    message = str(raised.value)
    assert message.startswith(
        f"No checkpoint in {saved} reads completely (checkpoint {saved}/ckpt-3 is truncated")
    assert all(f"{saved}/ckpt-{step} is truncated or corrupt" in message for step in (1, 2, 3))
    assert message.endswith("; restore their files (from a copy), or train in a new --model_dir.")


def test_a_run_killed_in_its_first_save_starts_from_scratch(tmp_path, caplog):
    directory = str(tmp_path / "checkpoints")
    _save(directory, steps=(1,))
    os.remove(os.path.join(directory, "checkpoint"))  # Killed before the state file was written.
    _cut(os.path.join(directory, "ckpt-1.index"), 20)
    with caplog.at_level(logging.WARNING):
        assert _restored(directory)[0] == (None, -1.0)
    assert caplog.records[-1].getMessage() == f"Starting from scratch: {directory} holds only partial saves."
