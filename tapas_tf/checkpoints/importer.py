"""Import a Hugging Face or original (TF1) TAPAS checkpoint into a tapas-tf model directory.

The command line is `tapas-tf import` (`tapas_tf.commands.import_checkpoint`).

The output is a self-describing model directory (`tapas_tf.checkpoints.model_dir`): `tapas_config.json`,
`checkpoints/ckpt-0` written by `tf.train.Checkpoint(model=model)` through a CheckpointManager,
`import_report.json` (what was mapped, left fresh, dropped or skipped) and the source's
`vocab.txt` when it has one. `tapas_tf.load_model(OUT)` then returns the Keras model.

The import is strict: a weight of the target model that the checkpoint does not set, or a
checkpoint tensor that nothing uses, stops it with the list of names. `--skip_heads` allows,
on purpose, leaving the heads and the pooler at their fresh initialisation and dropping the
source's heads that the target does not have (e.g. the masked-LM head when fine-tuning).
An embedding table that the target's config switches off (the ablations `use_position_embeddings`,
`use_rank_embeddings`, `use_column_embeddings`, `use_row_embeddings` set to false, e.g. through
`--model_options`) is always dropped, and listed under "dropped" and in a note of the report.

The target model is a TapasForMaskedLM when the checkpoint has a masked-LM head (with the
next-sentence head if it has one too), else a TapasForQuestionAnswering; `--target` forces it.
A table classifier (TabFact: HF's TapasForSequenceClassification, or a TF1 checkpoint with
`output_weights_cls`) is a TapasForQuestionAnswering whose config has `num_classification_labels`.

Where the config comes from:
- `hf`: `config.json` gives every option (`hf.tapas_config_from_hf`).
- `tf1`: `bert_config.json` gives the encoder; the task options come from `--task`
  (`tapas_tf.task_registry.presets.PRESETS`) and `--model_options`. `reset_position_index_per_cell` must be
  given in `--model_options`: the release's name says it (`..._reset`), its files do not.
`--model_options` (a JSON object of TapasConfig fields) is applied last, for both formats.
"""

import dataclasses
import json
import os
import shutil
import tempfile
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Sequence

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
import numpy as np

from tapas_tf.checkpoints import hf, model_dir as model_dir_lib, names, tf1
from tapas_tf.models.config import TapasConfig
from tapas_tf.task_registry.presets import PRESETS, Task, TaskPreset

FORMATS = ("hf", "tf1")
TARGETS = ("auto", "qa", "mlm")
REPORT_FILE = "import_report.json"
VOCAB_FILE = "vocab.txt"


@dataclasses.dataclass
class AssignReport:
    """What `assign_weights` did, by TF1 name."""

    mapped: List[str]
    fresh: List[str]
    dropped: List[str]
    notes: List[str] = dataclasses.field(default_factory=list)


def parse_model_options(text: Optional[str]) -> Dict[str, Any]:
    """A `--model_options` JSON object of TapasConfig fields (empty when `text` is empty)."""
    values = parse_options_object(text)
    unknown = sorted(set(values) - {field.name for field in dataclasses.fields(TapasConfig)})
    if unknown:
        raise ValueError(f"--model_options has unknown TapasConfig fields: {', '.join(unknown)}.")
    return values


def parse_options_object(text: Optional[str]) -> Dict[str, Any]:
    """The JSON object of a `--model_options` flag, its fields unchecked (empty when `text` is empty)."""
    if not text:
        return {}
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--model_options is not valid JSON: {e}") from e
    if not isinstance(values, dict):
        raise ValueError("--model_options must be a JSON object of TapasConfig fields.")
    return values


def task_options(task: Optional[str]) -> Dict[str, Any]:
    """The TapasConfig fields of a task preset (e.g. WTQ's temperature and answer loss)."""
    if not task:
        return {}
    try:
        preset = PRESETS[Task(task.upper())]
    except ValueError as e:
        raise ValueError(f"Unknown --task {task!r}; expected one of {[t.value for t in Task]}.") from e
    return preset_options(preset)


def preset_options(preset: TaskPreset) -> Dict[str, Any]:
    """The TapasConfig fields of a preset (e.g. `tasks.TABFACT_PRESET`'s classifier)."""
    fields = {field.name for field in dataclasses.fields(TapasConfig)}
    return {field.name: getattr(preset, field.name) for field in dataclasses.fields(preset) if field.name in fields}


def build_model(config: TapasConfig, target: str, use_next_sentence_prediction: bool = False):
    """A built TapasForQuestionAnswering ("qa") or TapasForMaskedLM ("mlm") with fresh weights."""
    from tapas_tf.models.pretrain_model import TapasForMaskedLM  # pylint: disable=import-outside-toplevel
    from tapas_tf.models.qa_model import TapasForQuestionAnswering  # pylint: disable=import-outside-toplevel

    if target == "qa":
        model = TapasForQuestionAnswering(config)
    elif target == "mlm":
        model = TapasForMaskedLM(config, use_next_sentence_prediction=use_next_sentence_prediction)
    else:
        raise ValueError(f"Unknown target {target!r}; expected 'qa' or 'mlm'.")
    model.weight_map()  # Builds the variables.
    return model


def choose_target(target: str, arrays: Mapping[str, np.ndarray]) -> str:
    """Resolves "auto": "mlm" when the checkpoint has a masked-LM head, else "qa"."""
    if target not in TARGETS:
        raise ValueError(f"Unknown --target {target!r}; expected one of {TARGETS}.")
    if target != "auto":
        return target
    return "mlm" if any(name.startswith("cls/predictions/") for name in arrays) else "qa"


def assign_weights(
    model, arrays: Mapping[str, np.ndarray], skip_heads: bool = False, unknown: Sequence[str] = ()
) -> AssignReport:
    """Sets every variable of `model` from the TF1-named `arrays`, strictly.

    Args:
      model: a built model with `weight_map()` (TF1 name -> variable).
      arrays: TF1 name -> array in the TF1 layout (`names.tf1_shape`).
      skip_heads: allow heads and pooler of the model to stay fresh, and drop source heads
        the model lacks. Encoder weights are never optional.
      unknown: source tensor names that map to no TAPAS variable (always refused).

    Checkpoint tables of embeddings that the model's config switches off are always dropped,
    with a note naming the switch.

    Raises:
      ValueError: listing the unset weights, the unused tensors, or the shape mismatches.
    """
    targets = model.weight_map()
    missing = sorted(set(targets) - set(arrays))
    unused = sorted(set(arrays) - set(targets))
    fresh, dropped = [], []
    if skip_heads:
        fresh = [name for name in missing if names.is_head_name(name)]
        dropped = [name for name in unused if names.is_head_name(name)]
        missing = [name for name in missing if name not in fresh]
        unused = [name for name in unused if name not in dropped]
    disabled = disabled_weight_names(model)
    ablated = [name for name in unused if name in disabled]
    notes = [f"dropped {name}: {disabled[name]}=false" for name in ablated]
    dropped += ablated
    unused = [name for name in unused if name not in disabled]
    unused += list(unknown)
    if missing or unused:
        problems = []
        if missing:
            problems.append(f"weights of the model that the checkpoint does not set: {', '.join(missing)}")
        if unused:
            problems.append(f"checkpoint tensors that nothing uses: {', '.join(unused)}")
        hint = "" if skip_heads else " (--skip_heads leaves heads and pooler fresh on purpose)"
        raise ValueError("The checkpoint does not fit the model" + hint + ". " + "; ".join(problems) + ".")
    mismatched = [
        f"{name} {tuple(arrays[name].shape)} != {names.tf1_shape(name, variable.shape)}"
        for name, variable in sorted(targets.items())
        if name in arrays and tuple(arrays[name].shape) != names.tf1_shape(name, variable.shape)
    ]
    if mismatched:
        raise ValueError("Checkpoint shapes do not match the config: " + "; ".join(mismatched) + ".")
    mapped = []
    for name, variable in sorted(targets.items()):
        if name in arrays:
            variable.assign(np.reshape(arrays[name], variable.shape).astype(variable.dtype.as_numpy_dtype))
            mapped.append(name)
    return AssignReport(mapped=mapped, fresh=fresh, dropped=dropped, notes=notes)


def disabled_weight_names(model) -> Dict[str, str]:
    """TF1 name -> switch, for the embedding tables that `model`'s config switches off."""
    encoder = getattr(model, "encoder", None)
    if encoder is None:
        return {}
    return encoder.embeddings.disabled_weight_names("bert/embeddings")


def export_tf1_arrays(model) -> Dict[str, np.ndarray]:
    """Every variable of `model` under its TF1 name, in the TF1 layout (for a TF1 checkpoint)."""
    return {
        name: np.reshape(variable.numpy(), names.tf1_shape(name, variable.shape))
        for name, variable in model.weight_map().items()
    }


def write_model_dir(model, config: TapasConfig, model_dir: str, report: Mapping[str, Any]) -> str:
    """Writes config, checkpoint `ckpt-0` and report; refuses a directory that holds a model."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if os.path.exists(model_dir_lib.config_path(model_dir)) or model_dir_lib.latest_checkpoint(model_dir):
        raise ValueError(f"{model_dir} already holds a model; import into a new directory.")
    model_dir_lib.save_config(model_dir, config)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), model_dir_lib.checkpoint_dir(model_dir), max_to_keep=1
    )
    path = manager.save(checkpoint_number=0)
    with open(os.path.join(model_dir, REPORT_FILE), "w", encoding="utf-8") as f:
        json.dump({**report, "checkpoint": os.path.relpath(path, model_dir)}, f, indent=2, sort_keys=True)
        f.write("\n")
    return path


def import_checkpoint(
    fmt: str,
    source: str,
    model_dir: str,
    skip_heads: bool = False,
    task: Optional[str] = None,
    model_options: Optional[Mapping[str, Any]] = None,
    target: str = "auto",
) -> Dict[str, Any]:
    """Imports `source` (a directory, a TF1 prefix or a .zip) into a new `model_dir`.

    Returns:
      The import report (also written to `model_dir/import_report.json`).
    """
    if fmt not in FORMATS:
        raise ValueError(f"Unknown --format {fmt!r}; expected one of {FORMATS}.")
    if task and fmt != "tf1":
        raise ValueError("--task applies to --format=tf1 only; a HF config.json holds the task options.")
    with tempfile.TemporaryDirectory() as scratch:
        source_dir = _unpack(source, scratch, hf.CONFIG_FILE if fmt == "hf" else tf1.BERT_CONFIG_FILE)
        if fmt == "hf":
            config, arrays, unknown, notes = _read_hf(source_dir, model_options)
        else:
            config, arrays, unknown, notes = _read_tf1(source, source_dir, task, model_options)
        resolved = choose_target(target, arrays)
        use_nsp = resolved == "mlm" and "cls/seq_relationship/output_weights" in arrays
        model = build_model(config, resolved, use_nsp)
        assigned = assign_weights(model, arrays, skip_heads=skip_heads, unknown=unknown)
        report = {
            "format": fmt,
            "source": os.path.abspath(source),
            "model_class": type(model).__name__,
            "use_next_sentence_prediction": use_nsp,
            "hidden_act": config.hidden_act,
            "mapped": len(assigned.mapped),
            "fresh": assigned.fresh,
            "dropped": assigned.dropped,
            "notes": notes + assigned.notes,
        }
        write_model_dir(model, config, model_dir, report)
        if os.path.exists(os.path.join(source_dir, VOCAB_FILE)):
            shutil.copyfile(os.path.join(source_dir, VOCAB_FILE), os.path.join(model_dir, VOCAB_FILE))
    return report


def _read_hf(source_dir: str, model_options: Optional[Mapping[str, Any]]):
    config, config_notes = hf.tapas_config_from_hf(hf.read_hf_config(source_dir), model_options)
    arrays, unknown, notes = hf.hf_to_canonical(hf.read_hf_tensors(source_dir))
    arrays = hf.add_unused_cell_selection_head(hf.drop_inactive_heads(arrays, config, notes), config, notes)
    return config, arrays, unknown, config_notes + notes


def _read_tf1(source: str, source_dir: str, task: Optional[str], model_options: Optional[Mapping[str, Any]]):
    options = {**task_options(task), **(model_options or {})}
    if "reset_position_index_per_cell" not in options:
        raise ValueError(
            "An original TAPAS checkpoint does not record whether positions restart in every cell. Pass "
            "--model_options='{\"reset_position_index_per_cell\": true}' for a release named *_reset, "
            "false otherwise."
        )
    config, notes = tf1.tapas_config_from_bert_config(tf1.read_bert_config(source_dir), options)
    prefix_source = source if os.path.exists(source + ".index") else source_dir
    arrays, skipped = tf1.read_tf1_checkpoint(tf1.find_checkpoint_prefix(prefix_source))
    if skipped:
        notes.append(f"skipped {len(skipped)} optimizer slots and counters (e.g. {skipped[0]})")
    return config, arrays, [], notes


def _unpack(source: str, scratch: str, marker: str) -> str:
    """The directory holding `marker`: `source` itself, a prefix's directory, or inside a zip."""
    if source.endswith(".zip") and os.path.isfile(source):
        with zipfile.ZipFile(source) as archive:
            archive.extractall(scratch)
        found = [root for root, _, files in os.walk(scratch) if marker in files]
        if len(found) != 1:
            raise ValueError(f"{source}: expected one {marker} in the zip, found {len(found)}.")
        return found[0]
    if os.path.isdir(source):
        return source
    if os.path.exists(source + ".index"):
        return os.path.dirname(os.path.abspath(source))
    raise ValueError(f"{source}: no such directory, checkpoint prefix or zip file.")
