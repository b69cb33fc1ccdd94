"""Kafka's command-line tools (the kafka-tools 4.4 jars tests/reference caches) run against a
broker, as kafka-topics.sh and friends run them."""

from __future__ import annotations

import os
import re
import subprocess

import pytest


def kafka_tools_classpath() -> str | None:
    libs = os.path.expanduser("~/.cache/minibroker-tests/kafka-4.4.0/libs")
    return f"{libs}/*" if os.path.isdir(libs) else None


def topic_command(bootstrap: str, *args: str) -> tuple[int, str]:
    """Run kafka-topics.sh; (exit code, stdout and stderr without the JVM's log lines)."""
    cp = kafka_tools_classpath()
    if cp is None:
        pytest.skip("Kafka 4.4's jars are not cached (tests/reference)")
    r = subprocess.run(["java", "-cp", cp, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                        *args], capture_output=True, text=True, timeout=120)
    lines = [line for line in (r.stdout + r.stderr).splitlines()
             if line.strip() and not re.match(r"^(\[|SLF4J|WARNING|log4j)", line)]
    return r.returncode, "\n".join(lines)
