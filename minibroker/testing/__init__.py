"""Run real minibroker processes from tests and scripts (see pytest_plugin for the fixtures)."""
