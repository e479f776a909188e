"""Reading and writing interaction files.

Two formats, both compatible with the original TAPAS tools:

* TFRecord files of binary `Interaction` protos (`*.tfrecord`, optionally GZIP
  compressed as `*.tfrecord.gz`);
* text format, one interaction per line (`*.txtpb`, or gzip-compressed
  `*.txtpb.gz`), which is how Google released the pre-training corpus.

The format is chosen from the file name. Errors name the file and the record
or line number.

`read_interactions` raises at the first problem. `read_interactions_counting_lines` is for jobs
that read big released files: a line or record that does not parse is yielded as an
`InteractionFormatError` and reading goes on, while a file that cannot be read to its end (a
truncated or damaged gzip stream, a TFRecord cut short) raises `InteractionFileError`, naming the
file and the byte or record where it broke off.
"""

import glob
import gzip
import io
import itertools
import os
import re
import zlib
from typing import BinaryIO, Callable, Iterable, Iterator, List, Sequence, Union

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from tapas_tf.data.protos import interaction_pb2

Interaction = interaction_pb2.Interaction

_TEXT_SUFFIXES = (".txtpb", ".txtpb.gz")
_TFRECORD_SUFFIXES = (".tfrecord", ".tfrecord.gz", ".tfrecords", ".tfrecords.gz")


class InteractionFormatError(ValueError):
    """A record of an interaction file could not be parsed."""


class InteractionFileError(InteractionFormatError):
    """The file cannot be read to its end; `reason` is `truncated_gzip`, `bad_gzip`,
    `truncated_record` or `unreadable_file`, and `path` names the file."""

    def __init__(self, reason: str, path: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.path = path

    def __reduce__(self):
        # Why: Beam pickles exceptions it carries; the default would call __init__ with the message only.
        return InteractionFileError, (self.reason, self.path, str(self))


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


def _open_binary_local(path: str) -> BinaryIO:
    return open(path, "rb")


def _text_lines(path: str, opener: Callable[[str], BinaryIO]) -> Iterator[tuple]:
    """(line number, raw bytes of the line) of a text file, decompressed when it ends in `.gz`.

    Raises InteractionFileError when the gzip stream is damaged or ends before its end marker."""
    line_number = 0
    with opener(path) as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
        try:
            for line_number, line in enumerate(stream, start=1):
                yield line_number, line
        except EOFError as e:
            raise InteractionFileError(
                "truncated_gzip", path,
                f"{path}: the gzip data ends at byte {_position(raw)} before its end marker, after line "
                f"{line_number} (the file is truncated: recreate or copy it again)") from e
        except (gzip.BadGzipFile, zlib.error) as e:
            raise InteractionFileError(
                "bad_gzip", path, f"{path}: not a valid gzip file at byte {_position(raw)}, after line "
                f"{line_number} ({e})") from e
        except OSError as e:
            raise InteractionFileError("unreadable_file", path, f"{path}: cannot read it ({e})") from e


def _position(raw: BinaryIO) -> str:
    try:
        return str(raw.tell())
    except (OSError, ValueError, io.UnsupportedOperation):
        return "?"


def _parse_text_line(path: str, line_number: int, line: bytes) -> Interaction:
    try:
        return interaction_from_text_line(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InteractionFormatError(f"{path}:{line_number}: not UTF-8 (byte {e.start} of the line)") from e
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


def _read_tfrecord_records(path: str) -> Iterator[Union[Interaction, InteractionFormatError]]:
    """The records of a TFRecord file as Interactions; a record that is not one is yielded as an
    error (records are framed, so the ones after it still read), a file cut short raises."""
    import tensorflow as tf  # Imported lazily: text files need no TensorFlow.

    records = tf.data.TFRecordDataset(path, compression_type=_tfrecord_compression(path)).as_numpy_iterator()
    for record_number in itertools.count(1):
        try:
            record = next(records)
        except StopIteration:
            return
        except tf.errors.DataLossError as e:
            raise InteractionFileError(
                "truncated_record", path, f"{path}: record {record_number} is truncated or corrupt "
                f"({_data_loss_reason(e.message)}); recreate or copy the file again") from e
        except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as e:
            raise InteractionFileError("unreadable_file", path, f"{path}: cannot read it ({e.message})") from e
        try:
            yield Interaction.FromString(record)
        except DecodeError as e:
            yield InteractionFormatError(f"{path}: record {record_number}: not an Interaction ({e})")


def read_interactions_counting_lines(path: str, opener: Callable[[str], BinaryIO] = _open_binary_local
                                     ) -> Iterator[Union[Interaction, InteractionFormatError]]:
    """Interactions of one file, in file order, with each line or record that does not parse
    yielded as an `InteractionFormatError` in its place (blank lines are skipped).

    Args:
      path: a `.txtpb[.gz]` or TFRecord file (any other name is read as a TFRecord).
      opener: opens `path` for reading raw bytes (e.g. Beam's file systems, for gs://); TFRecords are
        read by TensorFlow's file systems.

    Raises:
      InteractionFileError: when the file cannot be read to its end (truncated or damaged gzip data,
        a record cut short); the interactions before the damage have been yielded.
    """
    if not is_text_format(path):
        yield from _read_tfrecord_records(path)
        return
    for line_number, line in _text_lines(path, opener):
        if not line.strip():
            continue
        try:
            yield _parse_text_line(path, line_number, line)
        except InteractionFormatError as e:
            yield e


def read_interactions(path: str) -> Iterator[Interaction]:
    """Yields the interactions of one file, in file order; the first line or record that does not
    parse raises its `InteractionFormatError`."""
    check_known_suffix(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such interaction file")
    return _raise_first_error(read_interactions_counting_lines(path))


def _raise_first_error(items: Iterator[Union[Interaction, InteractionFormatError]]) -> Iterator[Interaction]:
    for item in items:
        if isinstance(item, InteractionFormatError):
            raise item
        yield item


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


def expand_paths(patterns: Sequence[str], flag: str = "--interactions") -> List[str]:
    """Each value a path or a glob (a job's shards), in order; FileNotFoundError naming the `flag`
    value that matches no file."""
    paths: List[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        if not matches:
            raise FileNotFoundError(f"{flag}={pattern}: no file matches")
        paths += matches
    return paths
