"""Fixtures shared by the inference tests: the tiny trained model of test_sequential."""

from tests.inference.test_sequential import trained  # noqa: F401 (a pytest fixture)
