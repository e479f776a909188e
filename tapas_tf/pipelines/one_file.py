"""Writing a PCollection to one file without holding it in memory.

Beam writes a single file (`num_shards=1`, or `shard_name_template=""`) by keying every record on
one key and grouping them: the runner gathers the whole output before the first byte is written.
Under the DirectRunner that is the job's memory growing with its output (22.5 GB resident for
380,000 synthetic questions, each with its table, before the kernel killed the job).

Beam's unsharded writes stream instead: each bundle writes its records to a shard of its own as
they arrive. `WriteToOneFile` writes such shards beside the destination, then concatenates them
into it and deletes them, so the job's output keeps its single-file layout
(`tapas_tf.pipelines.task_files.split_paths`). Concatenation is valid for both formats written
here: a TFRecord file is a sequence of self-framed records, a text file a sequence of lines.
"""

import shutil
from typing import Iterable, Optional

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

# Beam's own shard template; the ".part" beside the destination keeps shards from ever taking
# the destination's name.
SHARD_SUFFIX = ".part"
_SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
_COPY_CHUNK = 16 << 20
TFRECORD = "tfrecord"
TEXT = "text"


def concatenate_shards(shards: Iterable[str], destination: str, header: Optional[str] = None) -> str:
    """Writes `header` (a line, when given) and then the bytes of `shards`, in name order, to
    `destination`; deletes the shards. Any filesystem Beam knows (local, gs://, ...).

    Returns `destination`."""
    shards = sorted(set(shards))
    raw = CompressionTypes.UNCOMPRESSED
    with FileSystems.create(destination, compression_type=raw) as out:
        if header is not None:
            out.write((header + "\n").encode("utf-8"))
        for shard in shards:
            with FileSystems.open(shard, compression_type=raw) as part:
                shutil.copyfileobj(part, out, _COPY_CHUNK)
    if shards:
        FileSystems.delete(shards)
    return destination


class WriteToOneFile(beam.PTransform):
    """Writes records to the one file `path`, streaming (see the module's docstring).

    Args:
      path: the destination file.
      kind: `TFRECORD` (records are bytes, or values of `coder`) or `TEXT` (records are lines).
      coder: the TFRecord coder (default: bytes as they are).
      header: for `TEXT`, a first line written even when there are no records.

    Output: a PCollection holding `path`, once the file is complete.
    """

    def __init__(self, path: str, kind: str = TFRECORD, coder: Optional[beam.coders.Coder] = None,
                 header: Optional[str] = None):
        super().__init__()
        if kind not in (TFRECORD, TEXT):
            raise ValueError(f"kind must be {TFRECORD!r} or {TEXT!r}, not {kind!r}")
        if header is not None and kind != TEXT:
            raise ValueError("a header is only for text files")
        self._path = path
        self._kind = kind
        self._coder = coder
        self._header = header

    def expand(self, records):
        prefix = self._path + SHARD_SUFFIX
        if self._kind == TFRECORD:
            write = beam.io.WriteToTFRecord(prefix, coder=self._coder or beam.coders.BytesCoder(),
                                            shard_name_template=_SHARD_TEMPLATE)
        else:
            write = beam.io.WriteToText(prefix, shard_name_template=_SHARD_TEMPLATE)
        return (records
                | "WriteShards" >> write
                | "ShardNames" >> beam.combiners.ToList()
                | "Concatenate" >> beam.Map(concatenate_shards, self._path, self._header))
