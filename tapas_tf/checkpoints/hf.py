"""Hugging Face TAPAS checkpoints: `config.json` + `model.safetensors` -> TapasConfig + TF1 arrays.

Tensors are read with the `safetensors` NumPy API, so PyTorch is not needed. A
`pytorch_model.bin` is a pickle; it is read only through `torch.load(weights_only=True)`, which
refuses pickled objects other than tensors, and without PyTorch the error says how to convert it.

Example:

    config, notes = tapas_config_from_hf(read_hf_config("hf_dir"))
    arrays, unknown, notes = hf_to_canonical(read_hf_tensors("hf_dir"))

A `TapasForSequenceClassification` (TabFact's table classifier) is the encoder with its pooler and
`classifier.weight` [num_labels, hidden], `classifier.bias` [num_labels] on the pooled output
(label 1 = entailed): they become our `output_weights_cls`, `output_bias_cls`. Its config gets the
classifier's options (`CLASSIFIER_OPTIONS`: no aggregation head, no cell-selection loss, no column
head), and the cell-selection head that HF's classifier lacks and ours always has is set to zero
(`add_unused_cell_selection_head`): a classifier never reads it.
"""

import dataclasses
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from tapas_tf.checkpoints import names
from tapas_tf.models.config import TapasConfig

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
SEQUENCE_CLASSIFICATION = "TapasForSequenceClassification"
# The head and loss options of an imported TapasForSequenceClassification, whatever its config.json
# says of the heads it does not have (tapas_tf.task_registry.presets.TABFACT_PRESET's): the classifier only.
CLASSIFIER_OPTIONS = {"num_aggregation_labels": 0, "disable_per_token_loss": True, "select_one_column": False}
_CELL_SELECTION_HEAD = ("output_weights", "output_bias")

# HF activation names -> ours. HF's "gelu" is the exact erf form; "gelu_new", "gelu_fast" and
# "gelu_pytorch_tanh" are all the tanh approximation (the original TF1 BERT's gelu).
HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}
# HF TapasConfig options that tapas-tf cannot reproduce; refused when not at these values.
UNSUPPORTED_HF_OPTIONS = {"use_gumbel_for_cells": False, "use_gumbel_for_aggregation": False}
# HF options that only name things and change no computation.
LABEL_ONLY_HF_OPTIONS = ("aggregation_labels", "no_aggregation_label_index")
# Our fields that HF spells the same and that are taken over as they are.
_SAME_NAME_FIELDS = tuple(
    field.name
    for field in dataclasses.fields(TapasConfig)
    if field.name not in ("hidden_act", "num_classification_labels")
)

_CONVERT_BIN_COMMAND = (
    "python -c \"import torch; from safetensors.torch import save_file; "
    "sd = torch.load('{path}', map_location='cpu', weights_only=True); "
    "save_file({{k: v.clone().contiguous() for k, v in sd.items()}}, '{target}')\""
)


def read_hf_config(source_dir: str) -> Dict[str, Any]:
    """The parsed `config.json` of a HF model directory."""
    return names.read_json_object(source_dir, CONFIG_FILE, "a Hugging Face")


def hf_activation(name: Any) -> str:
    """Our `hidden_act` for a HF activation name; ValueError for one we do not have."""
    if name not in HF_ACTIVATIONS:
        raise ValueError(f"Unsupported hidden_act {name!r}; tapas-tf supports {sorted(HF_ACTIVATIONS)}.")
    return HF_ACTIVATIONS[name]


def tapas_config_from_hf(
    hf_config: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None
) -> Tuple[TapasConfig, List[str]]:
    """Our TapasConfig from a HF TAPAS `config.json`, with `overrides` applied last.

    Every HF option that changes the forward pass or a loss has a field of the same name,
    except `hidden_act` (mapped by `HF_ACTIVATIONS`) and the classifier size, which is the
    number of labels of a TapasForSequenceClassification (whose head options are then
    `CLASSIFIER_OPTIONS`). Missing keys take HF's defaults (which are ours);
    `use_answer_as_supervision: null` means False, as in HF.

    Returns:
      (config, notes): notes name the HF options that were ignored and why.

    Raises:
      ValueError: an unsupported option (Gumbel sampling, an unknown activation) or a
        combination our config rejects (the message says which field).
    """
    model_type = hf_config.get("model_type", "tapas")
    if model_type != "tapas":
        raise ValueError(f"config.json has model_type {model_type!r}; the hf importer reads TAPAS models.")
    for option, supported in UNSUPPORTED_HF_OPTIONS.items():
        if hf_config.get(option, supported) != supported:
            raise ValueError(
                f"config.json sets {option}={hf_config[option]!r}: tapas-tf computes the expected answer "
                "without Gumbel sampling. Set it to false in a copy of config.json to import anyway."
            )
    values: Dict[str, Any] = {}
    for field in _SAME_NAME_FIELDS:
        if field in hf_config and hf_config[field] is not None:
            values[field] = hf_config[field]
    values["hidden_act"] = hf_activation(hf_config.get("hidden_act", "gelu"))
    if is_sequence_classifier(hf_config):
        values.update(CLASSIFIER_OPTIONS, num_classification_labels=num_labels(hf_config))
    notes = [
        f"ignored {key}={hf_config[key]!r} (labels only)"
        for key in LABEL_ONLY_HF_OPTIONS
        if hf_config.get(key) is not None
    ]
    values.update(overrides or {})
    try:
        return TapasConfig.from_dict(values), notes
    except ValueError as e:
        raise ValueError(f"config.json does not give a valid tapas-tf config: {e} Fix it with --model_options.") from e


def is_sequence_classifier(hf_config: Mapping[str, Any]) -> bool:
    """config.json describes a TapasForSequenceClassification."""
    return SEQUENCE_CLASSIFICATION in (hf_config.get("architectures") or ())


def num_labels(hf_config: Mapping[str, Any]) -> int:
    """The number of labels of a classifier's config.json (its id2label, else num_labels, else 2)."""
    if hf_config.get("id2label"):
        return len(hf_config["id2label"])
    return int(hf_config.get("num_labels", 2))


def read_hf_tensors(source_dir: str) -> Dict[str, np.ndarray]:
    """Every tensor of a HF model directory as NumPy arrays, by HF name.

    Reads `model.safetensors`, a sharded `model.safetensors.index.json`, or (only with
    PyTorch installed, without unpickling objects) `pytorch_model.bin`.
    """
    single = os.path.join(source_dir, SAFETENSORS_FILE)
    index = os.path.join(source_dir, SAFETENSORS_INDEX_FILE)
    if os.path.exists(single):
        return _load_safetensors(single)
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        tensors: Dict[str, np.ndarray] = {}
        for shard in shards:
            tensors.update(_load_safetensors(os.path.join(source_dir, shard)))
        return tensors
    binary = os.path.join(source_dir, PYTORCH_FILE)
    if os.path.exists(binary):
        return _read_pytorch_bin(binary, single)
    raise ValueError(f"{source_dir} holds neither {SAFETENSORS_FILE} nor {PYTORCH_FILE}.")


def _load_safetensors(path: str) -> Dict[str, np.ndarray]:
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    try:
        return dict(load_file(path))
    except Exception as e:  # pylint: disable=broad-except
        # e.g. bfloat16 tensors, which NumPy has no type for.
        raise ValueError(f"{path} cannot be read with the safetensors NumPy API: {e}") from e


def _read_pytorch_bin(path: str, safetensors_path: str) -> Dict[str, np.ndarray]:
    """Reads a PyTorch state dict with weights_only=True (no arbitrary unpickling)."""
    command = _CONVERT_BIN_COMMAND.format(path=path, target=safetensors_path)
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError(
            f"{path} is a pickled PyTorch file and PyTorch is not installed, so it cannot be read "
            f"safely. Convert it once where PyTorch is installed, then import again:\n  {command}"
        ) from e
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # pylint: disable=broad-except
        raise ValueError(
            f"{path} could not be loaded with torch.load(weights_only=True) ({e}). It may hold pickled "
            f"objects, which are refused. Convert it to safetensors:\n  {command}"
        ) from e
    if not isinstance(state, Mapping):
        raise ValueError(f"{path} does not hold a state dict (got {type(state).__name__}).")
    return {name: tensor.detach().cpu().float().numpy() if tensor.is_floating_point() else tensor.numpy()
            for name, tensor in state.items()}


def hf_to_canonical(tensors: Mapping[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], List[str], List[str]]:
    """Renames and transposes HF tensors into the TF1 layout.

    Args:
      tensors: HF name -> array, as `read_hf_tensors` returns.

    Returns:
      (arrays, unknown, notes): TF1 name -> float32 array; the HF names that are not TAPAS
      parameters (the caller refuses them); notes on buffers skipped and tied copies checked.

    Raises:
      ValueError: two HF names give the same variable, or a tied copy differs from its source.
    """
    prefix = names.encoder_prefix(tensors)
    arrays: Dict[str, np.ndarray] = {}
    sources: Dict[str, str] = {}
    unknown, notes, tied = [], [], {}
    for hf_name, value in sorted(tensors.items()):
        if hf_name in names.HF_TIED:
            tied[hf_name] = value
            continue
        if hf_name[len(prefix) :] in names.HF_BUFFERS and hf_name.startswith(prefix):
            notes.append(f"skipped buffer {hf_name}")
            continue
        mapped = names.hf_to_tf1(hf_name, prefix)
        if mapped is None:
            unknown.append(hf_name)
            continue
        tf1_name, transpose = mapped
        if tf1_name in arrays:
            raise ValueError(f"{sources[tf1_name]} and {hf_name} both give the variable {tf1_name}.")
        value = np.asarray(value, dtype=np.float32)
        arrays[tf1_name] = value.T if transpose else value
        sources[tf1_name] = hf_name
    for hf_name, value in tied.items():
        target = names.HF_TIED[hf_name]
        if target not in arrays or not np.array_equal(arrays[target], np.asarray(value, np.float32)):
            raise ValueError(
                f"{hf_name} is not tied to {target}: tapas-tf's masked-LM decoder is the word embedding "
                "table and its bias is cls.predictions.bias, so an untied decoder cannot be imported."
            )
        notes.append(f"checked tied copy {hf_name} == {target}")
    return arrays, unknown, notes


def drop_inactive_heads(
    arrays: Dict[str, np.ndarray], config: TapasConfig, notes: List[str]
) -> Dict[str, np.ndarray]:
    """Removes the column head HF always has but never uses when select_one_column is off.

    HF's TapasForQuestionAnswering creates column_output_weights/bias for every config; the
    original code and ours create them only with select_one_column. Appends a note per drop.
    """
    if config.select_one_column:
        return arrays
    kept = dict(arrays)
    for name in ("column_output_weights", "column_output_bias"):
        if kept.pop(name, None) is not None:
            notes.append(f"dropped {name}: unused with select_one_column=false")
    return kept


def add_unused_cell_selection_head(
    arrays: Dict[str, np.ndarray], config: TapasConfig, notes: List[str]
) -> Dict[str, np.ndarray]:
    """Sets the cell-selection head of a TapasForSequenceClassification's import to zero.

    HF's classifier has no cell-selection weights; our model always has `output_weights` and
    `output_bias`, which a classifier (disable_per_token_loss, no aggregation) never trains nor
    reads. Only for such a config, when the checkpoint has a classifier and neither weight; appends
    a note.
    """
    if (config.num_classification_labels == 0 or not config.disable_per_token_loss
            or config.num_aggregation_labels or "output_weights_cls" not in arrays
            or any(name in arrays for name in _CELL_SELECTION_HEAD)):
        return arrays
    notes.append("set output_weights, output_bias to zero: a TapasForSequenceClassification has no "
                 "cell-selection head, and a classifier does not use it")
    return {**arrays, "output_weights": np.zeros([config.hidden_size], np.float32),
            "output_bias": np.zeros([], np.float32)}


def canonical_to_hf(arrays: Mapping[str, np.ndarray], prefix: str = "tapas.") -> Dict[str, np.ndarray]:
    """The inverse of `hf_to_canonical`: TF1-named arrays -> HF names and layout.

    Args:
      arrays: TF1 name -> array (e.g. `tapas_tf.checkpoints.importer.export_tf1_arrays(model)`).
      prefix: encoder prefix, "tapas." for the task models, "" for a bare TapasModel.

    Returns:
      HF name -> contiguous array, ready for `safetensors.numpy.save_file`.
    """
    tensors = {}
    for tf1_name, value in arrays.items():
        hf_name, transpose = names.tf1_to_hf(tf1_name, prefix)
        # np.array (not np.ascontiguousarray, which turns a 0-d bias into shape [1]).
        tensors[hf_name] = np.array(value.T if transpose else value, order="C")
    return tensors
