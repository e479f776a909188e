"""Resuming from the newest checkpoint that reads completely, whatever a kill left behind.

A `tf.train.CheckpointManager` save writes `ckpt-N.data-*` and then `ckpt-N.index` in place, and
only then names ckpt-N in the `checkpoint` state file (written to a temporary name and renamed, so
it is never half written). A save that is killed leaves at most a partial ckpt-N that the state
file does not name, a `ckpt-N_temp/` directory and `checkpoint.tmp*` files; the checkpoint
resumed from is the newest one the state file names.

Two things still break a resume with TensorFlow alone: `tf.train.latest_checkpoint` returns None
when the newest named checkpoint has lost its .index (a run then starts over from step 0 beside
its own checkpoints), and a named checkpoint whose files were cut short (a disk filled, a copy
interrupted, a file system without atomic renames) stops the run. `restore_newest` tries the
named checkpoints newest first, then any other ckpt-N on disk, and restores the first that reads
completely, with a warning for each one skipped. The order of the candidates is the model
directory's (`model_dir.checkpoint_candidates`), which predict and export take their newest
complete checkpoint from too (`model_dir.latest_checkpoint`).
"""

import logging
import os
from typing import List, Optional

import tensorflow as tf

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.checkpoints.model_dir import named_checkpoints  # noqa: F401 (resuming's name for it)

# What CheckpointManager saves cut short leave: PREFIX-N_temp/ directories and the state file's
# temporary copies.
_PARTIAL_SAVES = ("*_temp", "checkpoint.tmp*")


def restore_newest(checkpoint: tf.train.Checkpoint, directory: str) -> Optional[str]:
    """Restores into `checkpoint` the newest checkpoint of `directory` that reads completely.

    The state file's checkpoints come first, newest first, then any it does not name (a save cut
    off before it was named, or a lost state file), highest number first. Each is restored in full
    (every tensor read and checked; every object of `checkpoint` matched), so a checkpoint that
    fails part way is overwritten by the next one tried. Each one skipped is logged as a warning.

    Returns:
      The prefix restored, or None when `directory` holds no checkpoint that reads and its state
      file names none (a run killed in its first save starts from scratch).

    Raises:
      CorruptCheckpointError: the state file names checkpoints and none of them (nor any other
        on disk) reads completely.
    """
    named = model_dir_lib.named_checkpoints(directory)
    failures = []
    for prefix in model_dir_lib.checkpoint_candidates(directory):
        try:
            missing = model_dir_lib.missing_checkpoint_file(prefix)
            if missing:
                raise model_dir_lib.CorruptCheckpointError(f"checkpoint {prefix}: its file {missing} is missing")
            with model_dir_lib.reading_checkpoint(prefix):
                checkpoint.restore(prefix).assert_existing_objects_matched()
        except model_dir_lib.CorruptCheckpointError as e:
            failures.append(str(e).rsplit("; ", 1)[0])  # Without the advice: the error below gives it.
            logging.warning("Skipping a checkpoint that does not read completely: %s", failures[-1])
            continue
        if failures:
            logging.warning("Resuming from the older checkpoint %s instead; the steps after it are trained "
                            "again.", prefix)
        return prefix
    if named:
        raise model_dir_lib.CorruptCheckpointError(
            f"No checkpoint in {directory} reads completely ({'; '.join(failures)}); restore their files "
            "(from a copy), or train in a new --model_dir.")
    if failures:
        logging.warning("Starting from scratch: %s holds only partial saves.", directory)
    return None


def remove_partial_saves(directory: str) -> List[str]:
    """Deletes what saves cut short left in `directory` (ckpt-N_temp/ directories, temporary copies
    of the state file); returns their paths. A partial ckpt-N is not deleted here: it is never
    resumed from unless it reads completely, and the next save of step N overwrites it."""
    removed = []
    for pattern in _PARTIAL_SAVES:
        for path in sorted(tf.io.gfile.glob(os.path.join(directory, pattern))):
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
            removed.append(path)
    if removed:
        logging.info("Removed %d files of checkpoint saves cut short in %s.", len(removed), directory)
    return removed
