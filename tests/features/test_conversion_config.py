"""ConversionConfig: built in one place, from named options."""

import ast
import os

import pytest

from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.features.vocab import resolve_vocab_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOME = os.path.join("tapas_tf", "features", "conversion_config.py")


def test_from_options_takes_fields_and_the_packaged_vocabulary_by_default():
    config = ConversionConfig.from_options(max_seq_length=64, max_row_id=9, drop_rows_to_fit=None)
    assert (config.vocab_file, config.max_seq_length, config.max_row_id, config.drop_rows_to_fit) == (
        resolve_vocab_file(None), 64, 9, None)
    assert config.max_column_id == 32  # untouched fields keep their defaults


def test_from_options_names_an_unknown_option_and_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown conversion options \['max_rows'\]; the options are "
                                         r"max_seq_length, max_column_id, max_row_id"):
        ConversionConfig.from_options(max_rows=3)
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        ConversionConfig.from_options(str(tmp_path / "nowhere.txt"))
    with pytest.raises(ValueError, match="max_row_id must be in"):
        ConversionConfig.from_options(max_row_id=1)


def _constructor_calls(path: str):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConversionConfig"]


def test_every_conversion_config_outside_the_tests_comes_from_from_options():
    """A task's data, a model's table limits, the pre-training examples' table part, the
    benchmarks: all go through `ConversionConfig.from_options`."""
    direct = []
    for folder in ("tapas_tf", "models", "beam_jobs", "benchmarks", "experiments"):
        for parent, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                path = os.path.join(parent, name)
                if name.endswith(".py") and os.path.relpath(path, ROOT) != HOME:
                    direct += [f"{os.path.relpath(path, ROOT)}:{line}" for line in _constructor_calls(path)]
    assert direct == []
