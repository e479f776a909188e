"""What dense retrieval embeds tables with: the `TableEmbedder` protocol and the model directory's hook.

    embedder = load_embedder("model_dirs/dual")     # reads model_dirs/dual/embedder.json
    vectors = embedder.embed_tables(tables)         # float32 [len(tables), embedder.dimension]

A model directory that can encode tables holds `embedder.json`, a JSON object whose `"kind"` names
the factory that builds the embedder (`register_embedder`); the rest of the object is the
factory's own configuration:

    {"kind": "dual_encoder", ...}
    {"kind": "my_kind", "module": "my_package.my_embedder", ...}

`"module"` (optional) is imported before the kind is looked up, so that a kind registered by that
module exists in every process that loads the directory: the workers of a Beam job
(`--direct_running_mode=multi_processing`, Dataflow) import nothing of the command's own. This
module registers no kind itself; the dense dual encoder registers `"dual_encoder"`.

`model_id` identifies the model (a fingerprint of its weights and configuration): the embedding
shards record it (`embedding_shards`), so that questions are never scored against tables embedded
by another model.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Protocol, Sequence, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # Only for the annotations: the protocol needs no pandas at run time.
    from tapas_tf.retrieval.collection import CollectionTable

__all__ = ["EMBEDDER_FILE", "EmbedderFactory", "TableEmbedder", "load_embedder", "register_embedder",
           "registered_kinds"]

EMBEDDER_FILE = "embedder.json"


@runtime_checkable
class TableEmbedder(Protocol):
    """Embeds tables as vectors that a question's embedding is compared with by inner product."""

    model_id: str  # A fingerprint of the model's weights and configuration; stored with the shards.
    dimension: int  # d, the size of each vector.

    def embed_tables(self, tables: Sequence["CollectionTable"]) -> np.ndarray:
        """float32 [len(tables), dimension], row i the embedding of tables[i]."""
        ...


# (model_dir, the object of embedder.json) -> an embedder.
EmbedderFactory = Callable[[str, Dict[str, Any]], TableEmbedder]

_FACTORIES: Dict[str, EmbedderFactory] = {}


def register_embedder(kind: str, factory: EmbedderFactory, replace: bool = False) -> None:
    """Makes `load_embedder` build `kind` with `factory(model_dir, config)`.

    Registering the same factory again does nothing (a module imported twice); another factory for
    a kind already registered raises ValueError unless `replace`, since two models claiming one
    kind would make a model directory mean different things in different processes.
    """
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"an embedder kind is a non-empty string, got {kind!r}")
    if not callable(factory):
        raise ValueError(f"the factory of embedder kind {kind!r} is not callable: {factory!r}")
    known = _FACTORIES.get(kind)
    if known is not None and known is not factory and not replace:
        raise ValueError(f"embedder kind {kind!r} is already registered (by {_name(known)}); "
                         "pass replace=True to replace it")
    _FACTORIES[kind] = factory


def registered_kinds() -> List[str]:
    return sorted(_FACTORIES)


def _name(factory: Callable) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"


def _read_config(model_dir: str) -> Dict[str, Any]:
    if not os.path.isdir(model_dir):
        raise ValueError(f"{model_dir}: no such model directory")
    path = os.path.join(model_dir, EMBEDDER_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file; a model directory that encodes tables holds {EMBEDDER_FILE} "
                         f'({{"kind": ...}}; kinds registered: {", ".join(registered_kinds()) or "none"})')
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return config


def load_embedder(model_dir: str) -> TableEmbedder:
    """The embedder of `model_dir`, built by the factory its embedder.json's "kind" names.

    Raises:
      ValueError: naming the directory or embedder.json when the directory or file is missing, the
        file is not a JSON object, "kind" is missing or not registered, "module" cannot be
        imported, or the embedder built has no string `model_id` or no positive int `dimension`.
    """
    model_dir = os.fspath(model_dir)
    config = _read_config(model_dir)
    path = os.path.join(model_dir, EMBEDDER_FILE)
    module = config.get("module")
    if module is not None:
        if not isinstance(module, str) or not module:
            raise ValueError(f'{path}: "module" must be a module name, got {module!r}')
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ValueError(f"{path}: cannot import module {module!r}, which registers its kind: {e}") from None
    kind = config.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f'{path} names no embedder "kind" (a string); kinds registered: '
                         f'{", ".join(registered_kinds()) or "none"}')
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise ValueError(f"{path}: unknown embedder kind {kind!r}; kinds registered: "
                         f"{', '.join(registered_kinds()) or 'none'} (a module that registers it can be "
                         f'named in the file as "module")')
    embedder = factory(model_dir, config)
    _check_embedder(embedder, path)
    return embedder


def _check_embedder(embedder: Any, path: str) -> None:
    model_id = getattr(embedder, "model_id", None)
    if not isinstance(model_id, str) or not model_id:
        raise ValueError(f"{path}: the embedder built has no model_id (a non-empty string), got {model_id!r}")
    dimension = getattr(embedder, "dimension", None)
    if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)) or dimension < 1:
        raise ValueError(f"{path}: the embedder built has no dimension (a positive int), got {dimension!r}")
    if not callable(getattr(embedder, "embed_tables", None)):
        raise ValueError(f"{path}: the embedder built has no embed_tables method")
