"""Shared test harness: fixtures live in tests/fixtures/, one module per external system."""

pytest_plugins = [
    "tests.fixtures.temporal",
    "tests.fixtures.kubesim",
]
