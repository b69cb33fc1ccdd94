"""The reference Kafka's KIP-714 metrics receiver (telemetry/TelemetrySink.java), compiled once
against Kafka's own kafka-clients jar and put on its classpath: with it Kafka serves
GetTelemetrySubscriptions and PushTelemetry, as a minibroker with --client-telemetry does."""

from __future__ import annotations

import shutil
from pathlib import Path

CLASS = "minibroker.reference.TelemetrySink"
SOURCES = Path(__file__).resolve().parent / "telemetry"


def classes(libs: Path) -> Path | None:
    """The compiled classes dir, or None without a JDK or Kafka's jars (Kafka then runs without it)."""
    from tests.integration.java_client import JavaToolchain, compile_drivers

    java, javac = shutil.which("java"), shutil.which("javac")
    jars = sorted(libs.glob("kafka-clients-*.jar")) if libs.is_dir() else []
    if not java or not javac or not jars:
        return None
    return compile_drivers(JavaToolchain(java, javac, jars[-1:]), src_dir=SOURCES)
