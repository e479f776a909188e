"""Dense retrieval: a `TableDualEncoder` model directory, used to embed questions and tables.

    >>> retriever = DenseRetriever.from_model_dir("my_retriever/")       # doctest: +SKIP
    >>> tables = retriever.embed_tables(collection_tables)               # float32 [n, dimension]
    >>> questions = retriever.embed_questions(["how tall is torre jaume i?"])
    >>> scores = questions @ tables.T                                    # higher is better

The directory is what `tapas-tf import-checkpoint` writes for Google's retrievers and what
`tapas-tf train-retriever` writes (`checkpoints.retriever`): dual_encoder.json, vocab.txt,
checkpoints/ and embedder.json. Its kind, "dual_encoder", is registered here with
`embedder.register_embedder`, so `embedder.load_embedder(model_dir)` (the Beam encoding job)
builds a `DenseRetriever` too.

Tables are embedded in batches of similar length (sorted by their real length), so a batch of
short tables is not padded to the longest table of the collection; what the table tower's
budget cut (columns, rows, title words) is summed in `cuts`.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any, Dict, Optional, Sequence

import numpy as np

from tapas_tf.checkpoints import retriever as retriever_dir
from tapas_tf.features.retrieval_features import RetrievalFeatures, TableFeatures, stack_tables
from tapas_tf.retrieval.collection import CollectionTable, table_to_interaction_table
from tapas_tf.retrieval.embedder import register_embedder

__all__ = ["DenseRetriever", "KIND"]

log = logging.getLogger(__name__)

KIND = retriever_dir.KIND
DEFAULT_BATCH_SIZE = 32


class DenseRetriever:
    """Embeds questions and tables with a dual encoder (implements `embedder.TableEmbedder`).

    Args:
      model: a built `TableDualEncoder` with its weights.
      config: its `DualEncoderConfig`.
      features: the feature builder of its lengths and vocabulary.
      model_id: the fingerprint that embedding shards and indexes record.
      batch_size: questions or tables per model call.
    """

    def __init__(self, model, config, features: RetrievalFeatures, model_id: str,
                 batch_size: int = DEFAULT_BATCH_SIZE, model_dir: str = ""):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.config = config
        self.features = features
        self.model_id = model_id
        self.model_dir = model_dir
        self.dimension = int(config.embedding_dim)
        self.similarity = "cosine" if config.normalize else "dot"
        self.batch_size = batch_size
        self.cuts: Dict[str, int] = collections.Counter()

    @classmethod
    def from_model_dir(cls, model_dir: str, batch_size: int = DEFAULT_BATCH_SIZE,
                       record: Optional[Dict[str, Any]] = None) -> "DenseRetriever":
        """The retriever of a dual-encoder directory (its newest checkpoint).

        Raises:
          ValueError: not a dual-encoder directory (named), or a checkpoint that does not fit.
        """
        model_dir = os.fspath(model_dir)
        record = record if record is not None else _read_record(model_dir)
        model, config = retriever_dir.load_dual_encoder(model_dir, _recorded_checkpoint(model_dir, record))
        vocab = os.path.join(model_dir, record.get("vocab_file") or "vocab.txt")
        features = cls.features_for(config, vocab if os.path.exists(vocab) else None)
        return cls(model, config, features, record["model_id"], batch_size, model_dir)

    @staticmethod
    def features_for(config, vocab_file: Optional[str]) -> RetrievalFeatures:
        """The feature builder of a DualEncoderConfig's lengths and token-type sizes."""
        encoder = config.encoder
        return RetrievalFeatures.create(vocab_file, config.max_query_length, config.max_table_length,
                                        max_column_id=int(encoder.type_vocab_sizes[1]),
                                        max_row_id=int(encoder.type_vocab_sizes[2]))

    # --- questions ------------------------------------------------------------------------------

    def embed_questions(self, questions: Sequence[str]) -> np.ndarray:
        """<float32>[len(questions), dimension]."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        out = np.zeros([len(questions), self.dimension], np.float32)
        for start in range(0, len(questions), self.batch_size):
            ids, mask, cut = self.features.questions(questions[start:start + self.batch_size])
            if cut:
                self.cuts["question_pieces_cut"] += cut
            vectors = self.model.embed_queries(tf.constant(ids), tf.constant(mask), training=False)
            out[start:start + len(ids)] = vectors.numpy()
        return out

    # --- tables ---------------------------------------------------------------------------------

    def table_features(self, table: CollectionTable) -> TableFeatures:
        """The table tower's input of one collection table (cuts counted in `cuts`)."""
        encoded = self.features.table(table_to_interaction_table(table), title=table.title or "")
        for name, count in encoded.stats.items():
            self.cuts[name] += count
        return encoded

    def embed_tables(self, tables: Sequence[CollectionTable]) -> np.ndarray:
        """<float32>[len(tables), dimension], row i for tables[i]."""
        return self.embed_table_features([self.table_features(table) for table in tables])

    def embed_table_features(self, encoded: Sequence[TableFeatures]) -> np.ndarray:
        """<float32>[len(encoded), dimension] from features built by `table_features`."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        out = np.zeros([len(encoded), self.dimension], np.float32)
        # Similar lengths together: the padding of a batch is its longest table's.
        order = sorted(range(len(encoded)), key=lambda i: int(encoded[i].features["input_mask"].sum()))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            stacked = stack_tables([encoded[i] for i in batch])
            vectors = self.model.embed_tables({k: tf.constant(v) for k, v in stacked.items()}, training=False)
            out[batch] = vectors.numpy()
        return out


def _read_record(model_dir: str) -> Dict[str, Any]:
    import json  # pylint: disable=import-outside-toplevel

    path = os.path.join(model_dir, retriever_dir.EMBEDDER_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{model_dir} is not a dual-encoder directory: it has no {retriever_dir.EMBEDDER_FILE}")
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    if record.get("kind") != KIND:
        raise ValueError(f"{path}: kind {record.get('kind')!r}, not {KIND!r}")
    return record


def _recorded_checkpoint(model_dir: str, record: Dict[str, Any]) -> Optional[str]:
    """The checkpoint embedder.json names (its model_id fingerprints that one), else the newest."""
    checkpoint = record.get("checkpoint")
    return os.path.join(model_dir, checkpoint) if checkpoint else None


def _factory(model_dir: str, record: Dict[str, Any]) -> DenseRetriever:
    return DenseRetriever.from_model_dir(model_dir, record=record)


register_embedder(KIND, _factory)

