"""Fixtures the training tests share."""

import pytest

from tests.training.test_input_pipeline import write_fixture_examples


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    """The eight fixture classifier examples' TFRecord file (`write_fixture_examples`), once per module."""
    directory = tmp_path_factory.mktemp("data")
    write_fixture_examples(directory)
    return str(directory / "tf_examples" / "train.tfrecord")
