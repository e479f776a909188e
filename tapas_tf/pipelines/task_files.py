"""Where a task's release files are read from and its outputs written to."""

import dataclasses
import logging
import os
from typing import Dict, List, Optional

from tapas_tf.tasks import PRESETS, Split, Task


def split_paths(output_dir: str, split: str) -> Dict[str, str]:
    return {
        "interactions": os.path.join(output_dir, "interactions", f"{split}.tfrecord"),
        "examples": os.path.join(output_dir, "tf_examples", f"{split}.tfrecord"),
        "failures": os.path.join(output_dir, "failures", f"{split}.tsv"),
    }


def available_splits(task: Task, input_dir: str, train_file_name: Optional[str] = None) -> List[Split]:
    """The task's splits whose files exist; a missing required file is an error.

    `train_file_name` replaces the train split's file (it is then required)."""
    splits = []
    for split in PRESETS[task].splits:
        if train_file_name and split.is_training:
            split = dataclasses.replace(split, file_name=train_file_name, required=True)
        path = os.path.join(input_dir, split.file_name)
        if os.path.exists(path):
            splits.append(split)
        elif split.required:
            raise FileNotFoundError(f"{path}: required {split.name} file of {task.value} not found")
        else:
            logging.info("%s not found; split %s skipped", path, split.name)
    return splits
