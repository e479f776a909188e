"""Where a task's release files are read from and its outputs written to (the layout the data
jobs write and the task command line reads)."""

import dataclasses
import logging
import os
from typing import Dict, List, Optional, Sequence

from tapas_tf.task_registry.presets import Split


def split_paths(output_dir: str, split: str) -> Dict[str, str]:
    """What create_data writes for a split, and train and predict read."""
    return {
        "interactions": os.path.join(output_dir, "interactions", f"{split}.tfrecord"),
        "examples": os.path.join(output_dir, "tf_examples", f"{split}.tfrecord"),
        "failures": os.path.join(output_dir, "failures", f"{split}.tsv"),
    }


def pretrain_examples(output_dir: str, split: str) -> str:
    """The glob of the masked-LM examples of a split (tapas-tf create-pretrain-data shards them)."""
    return os.path.join(output_dir, "tf_examples", f"{split}-*.tfrecord")


def available_splits(task_name: str, splits: Sequence[Split], input_dir: str,
                     train_file_name: Optional[str] = None) -> List[Split]:
    """The task's splits whose files exist; a missing required file is an error.

    `train_file_name` replaces the train split's file (it is then required)."""
    found = []
    for split in splits:
        if train_file_name and split.is_training:
            split = dataclasses.replace(split, file_name=train_file_name, required=True)
        path = os.path.join(input_dir, split.file_name)
        if os.path.exists(path):
            found.append(split)
        elif split.required:
            raise FileNotFoundError(f"{path}: required {split.name} file of {task_name} not found")
        else:
            logging.info("%s not found; split %s skipped", path, split.name)
    return found
