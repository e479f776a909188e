"""Fixtures shared by the serving tests: the tiny trained model of tests/inference/test_sequential."""

from tests.inference.test_sequential import trained  # noqa: F401 (a pytest fixture)
