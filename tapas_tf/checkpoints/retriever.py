"""Import Google's released table retrievers (TF1 dual encoders) into a tapas-tf dual-encoder directory.

    report = import_retriever("tapas_nq_hn_retriever_tiny", "retriever")   # a released name
    report = import_retriever("path/to/tapas_nq_hn_retriever_tiny.zip", "retriever")   # or dir, or prefix
    model, config = load_dual_encoder("retriever")                         # a TableDualEncoder

The command line is `tapas-tf import --format=tf1 --source=SOURCE --model_dir=OUT`: a TF1 checkpoint
with a question tower (`bert_1/`) is imported here (`--target=retriever` forces it).

Google's layout (tapas/models/table_retriever_model.py): `table_bert.create_model` is called twice,
tables first (variables under `bert/`), questions second (`bert_1/`, every token type 0, at most
`max_query_length` word pieces); each tower's vector is its pooled output (tanh dense on [CLS]),
projected by `table_projection`, `text_projection` <float32>[down_projection_dim, hidden] as
`h @ P^T` (our Dense kernels are P^T, [hidden, dim]). With `--down_projection_dim=0` (the
`tapas_dual_encoder_proj_0_*` models) there is no projection: projection_dim 0. Optimizer slots and
`global_step`, if the zip holds them, are skipped as the QA importer skips them.

What the checkpoint does not say, with the defaults of Google's code (`importer` options override):
- reset_position_index_per_cell: False. The retriever's `create_model` calls never pass it, so
  table_bert's default (False) holds: positions are absolute in both towers.
- max_query_length: 128, the flag's default in table_retriever_experiment.py.
- max_table_length: 512 (at most the position table), the max_seq_length of DENSE_TABLE_RETRIEVER.md's
  data recipe; it only sizes the tables' features, no weight depends on it.

The directory written:

    dual_encoder.json      the DualEncoderConfig (encoder, projection_dim, pooling "pooled", ...)
    embedder.json          {"kind": "dual_encoder", ...}: what `tapas_tf.retrieval.embedder` dispatches on
    vocab.txt              the release's word pieces
    checkpoints/ckpt-0.*   tf.train.Checkpoint(model=TableDualEncoder), as the QA importer writes
    import_report.json     what was mapped and skipped, the source (and a download's SHA-256)

Every error is a ValueError (a `released.ReleasedModelError` for names) with a one-line message naming
the file or tensor.
"""

import difflib
import hashlib
import os
import shutil
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
import numpy as np

from tapas_tf.checkpoints import importer, model_dir as model_dir_lib, names, released, tf1
from tapas_tf.models.config import TapasConfig

if TYPE_CHECKING:  # models.dual_encoder loads TensorFlow: imported where used, so `import --help` stays quick.
    from tapas_tf.models.dual_encoder import DualEncoderConfig

TARGET = "retriever"  # `tapas-tf import --target=retriever`.
KIND = released.DUAL_ENCODER
CONFIG_FILE = "dual_encoder.json"
EMBEDDER_FILE = "embedder.json"  # tapas_tf.retrieval.embedder.EMBEDDER_FILE (a room above this one).
EMBEDDER_FORMAT_VERSION = 1
QUERY_PREFIX = "bert_1/"
TABLE_PREFIX = "bert/"
# dual_encoder.TABLE_PROJECTION, TEXT_PROJECTION: Google's projections, <float32>[dim, hidden] each.
PROJECTIONS = ("table_projection", "text_projection")
# Google's defaults for what the checkpoint does not record (see the module docstring).
RETRIEVER_DEFAULTS = {"reset_position_index_per_cell": False}
DEFAULT_MAX_QUERY_LENGTH = 128
DEFAULT_MAX_TABLE_LENGTH = 512
# DualEncoderConfig fields an import may set; the others are fixed by Google's layout.
DUAL_OPTIONS = ("max_query_length", "max_table_length", "normalize", "logit_scale")
_MAX_NAMES_SHOWN = 8
# How close to a released name a missing source must be to be taken for its misspelling (difflib's ratio).
_TYPO_CUTOFF = 0.85


# --- options and layout --------------------------------------------------------------------


def parse_retriever_options(text: Optional[str]) -> Dict[str, Any]:
    """A `--model_options` JSON object for a retriever: TapasConfig fields of the encoder, and
    DUAL_OPTIONS (max_query_length, max_table_length, normalize, logit_scale)."""
    values = importer.parse_options_object(text)
    check_options(values)
    return values


def check_options(options: Mapping[str, Any]) -> None:
    """Raises ValueError naming the keys that are neither TapasConfig fields nor DUAL_OPTIONS."""
    known = set(TapasConfig.__dataclass_fields__) | set(DUAL_OPTIONS)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"retriever options have unknown fields: {', '.join(unknown)} (TapasConfig fields, "
                         f"or {', '.join(DUAL_OPTIONS)}).")


def has_question_tower(variable_names: Sequence[str]) -> bool:
    """True when a TF1 checkpoint's variables are a dual encoder's: a `bert_1/` question tower.

    `text_projection` is not required: the proj_0 models have none.
    """
    return any(name.startswith(QUERY_PREFIX) for name in variable_names)


def is_retriever_source(source: str) -> bool:
    """True when `source` names a retriever: a released name or zip address of one, or a local
    directory, prefix or zip whose checkpoint has a question tower (only its index is read).

    Raises:
      ValueError: `source` exists nowhere but is close to a released retriever's name.
    """
    if _is_local(source):
        return has_question_tower(_local_variable_names(source))
    stem = os.path.basename(source.partition("#")[0])
    stem = stem[: -len(".zip")] if stem.endswith(".zip") else stem
    if released.is_retriever_stem(stem):
        return True
    bare = "/" not in source and os.sep not in source
    if bare and difflib.get_close_matches(stem, released.RETRIEVER_RELEASES, n=1, cutoff=_TYPO_CUTOFF):
        released.retriever_release(source)  # A misspelt name: raises, naming the nearest release.
    return False


def _is_local(source: str) -> bool:
    return os.path.exists(source) or os.path.exists(source + ".index")


def _local_variable_names(source: str) -> List[str]:
    """The variable names of a local checkpoint; for a zip, from its `.index` member alone."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not (source.endswith(".zip") and os.path.isfile(source)):
        try:
            prefix = tf1.find_checkpoint_prefix(source)
        except ValueError:
            return []  # Not a checkpoint: the QA importer says why.
        return [name for name, _ in tf.train.list_variables(prefix)]
    with zipfile.ZipFile(source) as archive, tempfile.TemporaryDirectory() as scratch:
        indexes = [member for member in archive.namelist() if member.endswith(".index")]
        if len(indexes) != 1:
            return []
        path = archive.extract(indexes[0], scratch)
        return [name for name, _ in tf.train.list_variables(path[: -len(".index")])]


def retriever_config(bert_config: Mapping[str, Any], arrays: Mapping[str, np.ndarray], prefix: str,
                     options: Optional[Mapping[str, Any]] = None) -> Tuple["DualEncoderConfig", List[str]]:
    """The DualEncoderConfig of a Google retriever.

    Args:
      bert_config: its parsed bert_config.json (both towers share it).
      arrays: its variables (TF1 name -> array); the projections give projection_dim.
      prefix: the checkpoint's path, for messages.
      options: TapasConfig fields of the encoder and DUAL_OPTIONS; they win over Google's defaults.

    Returns:
      (config, notes): notes name the bert_config keys ignored.
    """
    from tapas_tf.models.dual_encoder import DualEncoderConfig  # pylint: disable=import-outside-toplevel

    options = dict(options or {})
    check_options(options)
    dual = {key: options.pop(key) for key in DUAL_OPTIONS if key in options}
    encoder, notes = tf1.tapas_config_from_bert_config(bert_config, {**RETRIEVER_DEFAULTS, **options})
    dual.setdefault("max_query_length", min(DEFAULT_MAX_QUERY_LENGTH, encoder.max_position_embeddings))
    dual.setdefault("max_table_length", min(DEFAULT_MAX_TABLE_LENGTH, encoder.max_position_embeddings))
    projection_dim = projection_dim_of(arrays, encoder.hidden_size, prefix)
    try:
        config = DualEncoderConfig(encoder=encoder, projection_dim=projection_dim, pooling="pooled",
                                   normalize=False, share_encoders=False, **dual)
    except ValueError as e:
        raise ValueError(f"{prefix}: the retriever's options do not give a valid config: {e}") from None
    return config, notes


def projection_dim_of(arrays: Mapping[str, np.ndarray], hidden_size: int, prefix: str) -> int:
    """down_projection_dim from `table_projection` and `text_projection` <float32>[dim, hidden];
    0 when neither is there (a proj_0 model).

    Raises:
      ValueError: only one of them, or a shape that is not [dim, hidden_size] for both.
    """
    present = [name for name in PROJECTIONS if name in arrays]
    if not present:
        return 0
    if len(present) == 1:
        missing = next(name for name in PROJECTIONS if name not in arrays)
        raise ValueError(f"{prefix}: has {present[0]} but no {missing}; a retriever projects both towers or "
                         "neither.")
    shapes = {name: tuple(arrays[name].shape) for name in PROJECTIONS}
    dims = {shape[0] for shape in shapes.values() if len(shape) == 2}
    if any(len(shape) != 2 or shape[1] != hidden_size for shape in shapes.values()) or len(dims) != 1:
        found = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"{prefix}: the projections must both be [down_projection_dim, hidden_size={hidden_size}] "
                         f"(Google's layout); found {found}.")
    return dims.pop()


# --- the weights -----------------------------------------------------------------------------


def build_dual_encoder(config: "DualEncoderConfig"):
    """A TableDualEncoder with its variables created (on all-zero features) and fresh weights."""
    from tapas_tf.models.dual_encoder import TableDualEncoder, dummy_retrieval_features  # pylint: disable=import-outside-toplevel

    model = TableDualEncoder(config)
    model(dummy_retrieval_features(), training=False)
    return model


def to_our_layout(arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Google's arrays with the projections transposed to our Dense kernels [hidden, dim]."""
    ours = dict(arrays)
    for name in PROJECTIONS:
        if name in ours:
            ours[name] = np.ascontiguousarray(ours[name].T)
    return ours


def check_question_tower(arrays: Mapping[str, np.ndarray], prefix: str) -> None:
    """Refuses, in one line, a checkpoint without a question tower: a single TAPAS encoder."""
    if not has_question_tower(list(arrays)):
        raise ValueError(
            f"{prefix} is not a dual-encoder retriever: it has no {QUERY_PREFIX} (question tower) variables, "
            "only a single TAPAS encoder (a QA or pre-trained checkpoint: import it with --format=tf1 "
            "--target=auto or qa).")


def check_layout(model, arrays: Mapping[str, np.ndarray], prefix: str) -> None:
    """Refuses, in one line, a checkpoint that is not `model`'s: one without a question tower, then
    one with names that are missing or that nothing uses."""
    check_question_tower(arrays, prefix)
    targets = model.weight_map()
    missing = sorted(set(targets) - set(arrays))
    unused = sorted(set(arrays) - set(targets))
    problems = []
    if missing:
        problems.append(f"missing {_few(missing)}")
    if unused:
        problems.append(f"unexpected {_few(unused)}")
    if problems:
        raise ValueError(f"{prefix} does not fit a retriever of its bert_config.json: " + "; ".join(problems) + ".")


def _few(names_: Sequence[str]) -> str:
    """The first names and how many more: a message stays one readable line."""
    shown = ", ".join(names_[:_MAX_NAMES_SHOWN])
    more = len(names_) - _MAX_NAMES_SHOWN
    return f"{len(names_)} tensors ({shown}{f', and {more} more' if more > 0 else ''})"


def assign_retriever_weights(model, arrays: Mapping[str, np.ndarray], prefix: str) -> importer.AssignReport:
    """Sets every variable of `model` from Google's `arrays` (strict, via `importer.assign_weights`)."""
    check_layout(model, arrays, prefix)
    try:
        return importer.assign_weights(model, to_our_layout(arrays))
    except ValueError as e:
        raise ValueError(f"{prefix}: {e}") from None


# --- the directory ---------------------------------------------------------------------------


def config_path(model_dir: str) -> str:
    return os.path.join(model_dir, CONFIG_FILE)


def write_dual_encoder_dir(model, config: "DualEncoderConfig", model_dir: str, report: Mapping[str, Any],
                           vocab_file: Optional[str]) -> str:
    """Writes the directory of the module docstring; refuses a directory that holds a model.

    Returns:
      The checkpoint prefix written (MODEL_DIR/checkpoints/ckpt-0).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    taken = [path for path in (config_path(model_dir), model_dir_lib.config_path(model_dir)) if os.path.exists(path)]
    if taken or model_dir_lib.latest_checkpoint(model_dir):
        raise ValueError(f"{model_dir} already holds a model; import into a new directory.")
    os.makedirs(model_dir, exist_ok=True)
    config.to_json_file(config_path(model_dir))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), model_dir_lib.checkpoint_dir(model_dir),
                                         max_to_keep=1)
    path = manager.save(checkpoint_number=0)
    if vocab_file:
        shutil.copyfile(vocab_file, os.path.join(model_dir, importer.VOCAB_FILE))
    checkpoint = os.path.relpath(path, model_dir)
    model_dir_lib.write_record(model_dir, importer.REPORT_FILE, {**report, "checkpoint": checkpoint})
    model_dir_lib.write_record(model_dir, EMBEDDER_FILE, embedder_record(model_dir, config, checkpoint,
                                                                         bool(vocab_file)))
    return path


def embedder_record(model_dir: str, config: "DualEncoderConfig", checkpoint: str, has_vocab: bool) -> Dict[str, Any]:
    """The object of embedder.json: the kind, its files, the vector size and similarity, and
    `model_id`, a fingerprint of the config and the weights' files (for the embedding shards)."""
    return {
        "kind": KIND,
        # Imported by `embedder.load_embedder` before the kind is looked up, so a fresh process
        # (a Beam worker) has the kind registered.
        "module": "tapas_tf.retrieval.dense",
        "format_version": EMBEDDER_FORMAT_VERSION,
        "config_file": CONFIG_FILE,
        "vocab_file": importer.VOCAB_FILE if has_vocab else None,
        "checkpoint": checkpoint,
        "dimension": config.embedding_dim,
        "similarity": "cosine" if config.normalize else "dot",
        "max_query_length": config.max_query_length,
        "max_table_length": config.max_table_length,
        "model_id": f"{KIND}-{_fingerprint(model_dir, checkpoint)}",
    }


def _fingerprint(model_dir: str, checkpoint: str) -> str:
    """The first 16 hex digits of the SHA-256 of dual_encoder.json and the checkpoint's files (or a
    compact directory's weights file)."""
    digest = hashlib.sha256()
    path = os.path.join(model_dir, checkpoint)
    directory, base = os.path.split(path)
    if os.path.isfile(path):  # A compact directory's weights file.
        files = [config_path(model_dir), path]
    else:
        files = [config_path(model_dir)] + sorted(os.path.join(directory, name) for name in os.listdir(directory)
                                                   if name.startswith(base + "."))
    for path in files:
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def load_dual_encoder(model_dir: str, checkpoint: Optional[str] = None):
    """The TableDualEncoder of a directory written by `import_retriever`, weights restored.

    Args:
      model_dir: the directory.
      checkpoint: a checkpoint prefix; default the newest complete one under checkpoints/, else the
        compact weights (`write_compact_dual_encoder_dir`).

    Returns:
      (model, config): the model, called as `model(features)` (see `TableDualEncoder`), and its
      DualEncoderConfig.

    Raises:
      ValueError: no dual_encoder.json (naming the directory), an invalid one, or a checkpoint that
        does not fit it.
      FileNotFoundError: no checkpoint.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from tapas_tf.models.dual_encoder import DualEncoderConfig  # pylint: disable=import-outside-toplevel

    values = names.read_json_object(model_dir, CONFIG_FILE, "a tapas-tf dual-encoder")
    try:
        config = DualEncoderConfig.from_dict(values)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{config_path(model_dir)}: {e}") from None
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    compact = checkpoint is None or checkpoint.endswith(".npz")
    if compact and not model_dir_lib.has_compact_weights(model_dir):
        raise FileNotFoundError(f"{model_dir}: no checkpoint under {model_dir_lib.CHECKPOINT_DIR}/")
    model = build_dual_encoder(config)
    if compact:
        model_dir_lib.restore_compact_weights(model, model_dir, compact_weight_map(model))
        return model, config
    with model_dir_lib.reading_checkpoint(checkpoint):
        status = tf.train.Checkpoint(model=model).restore(checkpoint)
    try:
        status.expect_partial().assert_existing_objects_matched()
    except AssertionError as e:
        raise ValueError(f"{checkpoint} does not fit {config_path(model_dir)}: {' '.join(str(e).split())[:300]}") from None
    return model, config


def compact_weight_map(model) -> Dict[str, Any]:
    """`model.weight_map()` with each variable once: shared towers keep only their `bert/` names,
    so that a compact file does not hold the encoder twice."""
    unique, seen = {}, set()
    for name, variable in sorted(model.weight_map().items()):
        if variable.ref() not in seen:
            seen.add(variable.ref())
            unique[name] = variable
    return unique


def write_compact_dual_encoder_dir(model_dir: str, out_dir: str, checkpoint: Optional[str] = None,
                                   weights: str = "int8", notes: Optional[Mapping[str, Any]] = None
                                   ) -> Dict[str, Any]:
    """Writes a dual-encoder directory's model as a compact one (for shipping in the package):
    dual_encoder.json, vocab.txt, `weights_int8.npz` (or float16), compact.json, and an
    embedder.json whose model_id fingerprints the compact weights, since their rounding changes the
    embeddings (an index built with the full-precision model is refused, not mixed).

    Returns:
      What compact.json holds (the source, the rounding error, the sizes, `notes`).

    Raises:
      ValueError: `out_dir` already holds a model; as `load_dual_encoder` for the source.
    """
    from tapas_tf.checkpoints import compact  # pylint: disable=import-outside-toplevel

    if os.path.exists(config_path(out_dir)):
        raise ValueError(f"{out_dir} already holds a dual encoder; write to a new directory")
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    model, config = load_dual_encoder(model_dir, checkpoint)
    os.makedirs(out_dir, exist_ok=True)
    config.to_json_file(config_path(out_dir))
    info = compact.write_compact_weights(out_dir, compact_weight_map(model), weights, model_dir, checkpoint, notes)
    vocab = os.path.join(model_dir, importer.VOCAB_FILE)
    if os.path.exists(vocab):
        shutil.copyfile(vocab, os.path.join(out_dir, importer.VOCAB_FILE))
    model_dir_lib.write_record(out_dir, EMBEDDER_FILE, embedder_record(
        out_dir, config, compact.WEIGHTS_FILES[weights], os.path.exists(vocab)))
    return info


# --- the import ------------------------------------------------------------------------------


def import_retriever(source: str, model_dir: str, model_options: Optional[Mapping[str, Any]] = None
                     ) -> Dict[str, Any]:
    """Imports one of Google's retrievers into a new `model_dir`.

    Args:
      source: a directory, TF1 checkpoint prefix or zip in Google's layout (bert_config.json,
        vocab.txt, model.ckpt.*), or a released name (`released.RETRIEVER_RELEASES`, optionally
        `#sha256=HEX`) or zip address, downloaded through `released.downloaded_zip`.
      model_dir: the directory to write (see the module docstring).
      model_options: TapasConfig fields of the encoder (e.g. reset_position_index_per_cell) and
        DUAL_OPTIONS; they win over Google's defaults.

    Returns:
      The import report (also MODEL_DIR/import_report.json).
    """
    if _is_local(source):
        return _import_local(source, model_dir, model_options, {"source": os.path.abspath(source)})
    release = released.retriever_release(source)
    with released.downloaded_zip(release) as (zip_path, digest):
        extra = {"source": release.display, "url": release.location, "sha256": digest}
        return _import_local(zip_path, model_dir, model_options, extra)


def released_retriever_dir(name: str, force_download: bool = False) -> str:
    """The cached directory of a released retriever, imported on first use (`released.import_once`).

    The cache is `released.models_cache_dir()`'s, with `model_kind` "dual_encoder" in released.json;
    a later call makes no network request.
    """
    release = released.retriever_release(name)

    def import_into(directory: str) -> Dict[str, Any]:
        with released.downloaded_zip(release) as (zip_path, digest):
            extra = {"source": release.display, "url": release.location, "sha256": digest}
            try:
                report = _import_local(zip_path, directory, None, extra)
            except ValueError as e:
                message = " ".join(str(e).split())
                raise released.ReleasedModelError(f"{release.display} cannot be imported: {message}") from None
        return dict(source="zip", url=release.location, sha256=digest, model_class=report["model_class"])

    def check_cached(final: str) -> str:
        manifest = released.read_manifest(final)
        if release.sha256 and manifest.get("sha256") != release.sha256:
            raise released.ReleasedModelError(
                f"{release.location}: the cached copy in {final} has SHA-256 {manifest.get('sha256')}, not the "
                f"expected {release.sha256}; delete that directory to download it again")
        if manifest.get("model_kind") != KIND:
            raise released.ReleasedModelError(f"{release.display} is cached in {final} as a "
                                              f"{manifest.get('model_kind')} model, not a retriever")
        return final

    return released.import_once(release, KIND, import_into, check_cached, force_download)


def _import_local(source: str, model_dir: str, model_options: Optional[Mapping[str, Any]],
                  extra: Mapping[str, Any]) -> Dict[str, Any]:
    """Imports a local directory, prefix or zip; `extra` goes into the report."""
    with tempfile.TemporaryDirectory() as scratch:
        source_dir = importer._unpack(source, scratch, tf1.BERT_CONFIG_FILE)  # pylint: disable=protected-access
        prefix = tf1.find_checkpoint_prefix(source if os.path.exists(source + ".index") else source_dir)
        arrays, skipped = tf1.read_tf1_checkpoint(prefix)
        check_question_tower(arrays, prefix)  # Before the config: a QA checkpoint's refusal says what it is.
        config, notes = retriever_config(tf1.read_bert_config(source_dir), arrays, prefix, model_options)
        model = build_dual_encoder(config)
        assigned = assign_retriever_weights(model, arrays, prefix)
        if skipped:
            notes.append(f"skipped {len(skipped)} optimizer slots and counters (e.g. {skipped[0]})")
        vocab = os.path.join(source_dir, importer.VOCAB_FILE)
        if not os.path.exists(vocab):
            notes.append(f"no {importer.VOCAB_FILE} in the source: give one to embed text")
        report = {
            "format": "tf1",
            "kind": KIND,
            **extra,
            "model_class": type(model).__name__,
            "hidden_act": config.encoder.hidden_act,
            "projection_dim": config.projection_dim,
            "reset_position_index_per_cell": config.encoder.reset_position_index_per_cell,
            "max_query_length": config.max_query_length,
            "max_table_length": config.max_table_length,
            "mapped": len(assigned.mapped),
            "fresh": assigned.fresh,
            "dropped": assigned.dropped,
            "notes": notes + assigned.notes,
        }
        write_dual_encoder_dir(model, config, model_dir, report, vocab if os.path.exists(vocab) else None)
    return report
