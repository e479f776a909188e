"""The model directory's hook: embedder.json names a registered kind, and every error names the file."""

import json

import numpy as np
import pytest

from tapas_tf.retrieval import embedder as embedder_module
from tapas_tf.retrieval.embedder import EMBEDDER_FILE, TableEmbedder, load_embedder, register_embedder


class _Constant:
    def __init__(self, model_id="constant-4", dimension=4):
        self.model_id, self.dimension = model_id, dimension

    def embed_tables(self, tables):
        return np.ones((len(tables), self.dimension), np.float32)


def _constant(model_dir, config):
    return _Constant(**{k: v for k, v in config.items() if k in ("model_id", "dimension")})


register_embedder("test_constant", _constant)


def _model_dir(tmp_path, text):
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / EMBEDDER_FILE).write_text(text if isinstance(text, str) else json.dumps(text))
    return str(tmp_path / "model")


def test_the_kind_builds_the_embedder(tmp_path):
    embedder = load_embedder(_model_dir(tmp_path, {"kind": "test_constant", "dimension": 3}))
    assert isinstance(embedder, TableEmbedder)
    assert (embedder.model_id, embedder.dimension) == ("constant-4", 3)
    assert embedder.embed_tables([None, None]).shape == (2, 3)


def test_a_module_named_in_the_file_registers_its_kind(tmp_path, monkeypatch):
    (tmp_path / "my_embedders.py").write_text(
        "from tapas_tf.retrieval.embedder import register_embedder\n"
        "from tests.retrieval.test_embedder import _Constant\n"
        "register_embedder('test_from_module', lambda model_dir, config: _Constant('from-module'))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(embedder_module, "_FACTORIES", dict(embedder_module._FACTORIES))
    embedder = load_embedder(_model_dir(tmp_path, {"kind": "test_from_module", "module": "my_embedders"}))
    assert embedder.model_id == "from-module"
    path = _model_dir(tmp_path, {"kind": "x", "module": "no_such_module_here"})
    with pytest.raises(ValueError, match=f"{path}/embedder.json: cannot import module 'no_such_module_here'"):
        load_embedder(path)


@pytest.mark.parametrize("content, expected", [
    ("{oops", "embedder.json is not valid JSON"),
    ("[1]", "embedder.json does not hold a JSON object"),
    ({"model": "x"}, 'embedder.json names no embedder "kind"'),
    ({"kind": "nope"}, "embedder.json: unknown embedder kind 'nope'; kinds registered: .*test_constant"),
    ({"kind": "test_constant", "model_id": ""}, "embedder.json: the embedder built has no model_id"),
    ({"kind": "test_constant", "dimension": 0}, "embedder.json: the embedder built has no dimension"),
])
def test_a_bad_file_is_refused_naming_it(tmp_path, content, expected):
    with pytest.raises(ValueError, match=expected):
        load_embedder(_model_dir(tmp_path, content))


def test_a_missing_directory_or_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path / 'none'}: no such model directory"):
        load_embedder(str(tmp_path / "none"))
    with pytest.raises(ValueError, match=f"{tmp_path}/embedder.json: no such file"):
        load_embedder(str(tmp_path))


def test_a_kind_is_registered_once(monkeypatch):
    monkeypatch.setattr(embedder_module, "_FACTORIES", dict(embedder_module._FACTORIES))
    register_embedder("test_constant", _constant)  # The same factory again: a module imported twice.
    with pytest.raises(ValueError, match="embedder kind 'test_constant' is already registered"):
        register_embedder("test_constant", lambda model_dir, config: _Constant())
    register_embedder("test_constant", lambda model_dir, config: _Constant("replaced"), replace=True)
    with pytest.raises(ValueError, match="a non-empty string"):
        register_embedder("", _constant)
