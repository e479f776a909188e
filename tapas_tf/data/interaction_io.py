"""Reading and writing interaction files.

Two formats, both compatible with the original TAPAS tools:

* TFRecord files of binary `Interaction` protos (`*.tfrecord`, optionally GZIP
  compressed as `*.tfrecord.gz`);
* text format, one interaction per line (`*.txtpb`, or gzip-compressed
  `*.txtpb.gz`), which is how Google released the pre-training corpus.

The format is chosen from the file name. Errors name the file and the record
or line number.
"""

import gzip
import os
import re
from typing import Iterable, Iterator

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from tapas_tf.data.protos import interaction_pb2

Interaction = interaction_pb2.Interaction

_TEXT_SUFFIXES = (".txtpb", ".txtpb.gz")
_TFRECORD_SUFFIXES = (".tfrecord", ".tfrecord.gz", ".tfrecords", ".tfrecords.gz")


class InteractionFormatError(ValueError):
    """A record of an interaction file could not be parsed."""


def is_text_format(path: str) -> bool:
    return path.endswith(_TEXT_SUFFIXES)


def check_known_suffix(path: str) -> None:
    if not path.endswith(_TEXT_SUFFIXES + _TFRECORD_SUFFIXES):
        raise ValueError(
            f"{path}: unknown interaction file type; use one of "
            f"{', '.join(_TEXT_SUFFIXES + _TFRECORD_SUFFIXES)}")


def _open_text(path: str, mode: str):
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def interaction_to_text_line(interaction: Interaction) -> str:
    """One-line text format of an interaction (no trailing newline)."""
    return text_format.MessageToString(interaction, as_one_line=True, as_utf8=True)


def interaction_from_text_line(line: str) -> Interaction:
    return text_format.Parse(line, Interaction())


def _read_text(path: str) -> Iterator[Interaction]:
    with _open_text(path, "r") as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield interaction_from_text_line(line)
            except text_format.ParseError as e:
                raise InteractionFormatError(f"{path}:{line_number}: {e}") from e


def _tfrecord_compression(path: str) -> str:
    return "GZIP" if path.endswith(".gz") else ""


def _data_loss_reason(message: str) -> str:
    """The useful part of TensorFlow's DataLossError message, e.g. "truncated record at 464".

    TensorFlow wraps it in the name of the op's function and device, and never names the file.
    """
    match = re.search(r"(truncated|corrupted) record at \d+", message)
    return match.group(0) if match else message.strip().splitlines()[0]


def _read_tfrecord(path: str) -> Iterator[Interaction]:
    import tensorflow as tf  # Imported lazily: text files need no TensorFlow.

    dataset = tf.data.TFRecordDataset(path, compression_type=_tfrecord_compression(path))
    records = dataset.as_numpy_iterator()
    record_number = 0
    while True:
        record_number += 1
        try:
            record = next(records)
        except StopIteration:
            return
        except tf.errors.DataLossError as e:  # A file cut short (an interrupted copy) or damaged.
            raise InteractionFormatError(
                f"{path}: record {record_number} is truncated or corrupt ({_data_loss_reason(e.message)}); "
                "recreate or copy the file again") from e
        try:
            yield Interaction.FromString(record)
        except DecodeError as e:
            raise InteractionFormatError(f"{path}: record {record_number}: {e}") from e


def read_interactions(path: str) -> Iterator[Interaction]:
    """Yields the interactions of one file, in file order."""
    check_known_suffix(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such interaction file")
    if is_text_format(path):
        return _read_text(path)
    return _read_tfrecord(path)


def write_interactions(path: str, interactions: Iterable[Interaction]) -> int:
    """Writes interactions to `path` in the format its suffix names; returns the count."""
    check_known_suffix(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    count = 0
    if is_text_format(path):
        with _open_text(path, "w") as f:
            for interaction in interactions:
                f.write(interaction_to_text_line(interaction) + "\n")
                count += 1
        return count
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=_tfrecord_compression(path))
    with tf.io.TFRecordWriter(path, options) as writer:
        for interaction in interactions:
            writer.write(interaction.SerializeToString())
            count += 1
    return count
