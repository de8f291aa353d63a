"""The engine tests' fixtures: the test key in the environment, a fake server per test."""

from tests.engine.conftest import _test_key, fake_server  # noqa: F401  (fixtures, found by name)
