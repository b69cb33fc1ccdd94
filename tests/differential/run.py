"""Start the two brokers of a differential run: Kafka (the reference) and minibroker, same settings."""

from __future__ import annotations

import contextlib
import os

from minibroker.testing.broker import MiniBroker
from tests.reference import settings
from tests.reference.checkout import checkout_path
from tests.reference.kafka import KafkaReference

from . import machine
from .pair import Pair


@contextlib.contextmanager
def minibroker_reference(checkout: str | None = None):
    env = {"PYTHONPATH": checkout_path(checkout)} if checkout else None
    options = settings.minibroker_options()
    if checkout:  # an older checkout may predate --client-telemetry
        options.pop("client_telemetry")
    with MiniBroker(name="differential", env=env, **options) as mb:
        yield mb


@contextlib.contextmanager
def brokers(kafka: KafkaReference | None = None, checkout: str | None = None):
    """A ``Pair`` over a Kafka (started here unless given) and a new minibroker; sets ``machine.PAIR``."""
    with contextlib.ExitStack() as stack:
        if kafka is None:
            kafka = stack.enter_context(KafkaReference(settings.kafka_properties(), classpath=settings.kafka_classpath()))
        mb = stack.enter_context(minibroker_reference(checkout))
        pair = Pair(kafka.port, mb.port)
        stack.callback(pair.close)
        machine.PAIR = pair
        try:
            yield pair, kafka, mb
        finally:
            machine.PAIR = None


def hypothesis_settings(examples: int, steps: int = 25):
    from hypothesis import HealthCheck, Phase, settings as hsettings

    return hsettings(max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=False,
                     suppress_health_check=list(HealthCheck), database=None,
                     phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink, Phase.explain],
                     print_blob=bool(os.environ.get("CI")))
