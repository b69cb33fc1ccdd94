"""Start the two brokers of a differential run: Kafka (the reference) and minibroker, same settings."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from minibroker.testing.broker import MiniBroker
from tests.reference import settings
from tests.reference.checkout import checkout_path
from tests.reference.kafka import KafkaReference, free_port

from . import machine
from .pair import Pair


@contextlib.contextmanager
def minibroker_reference(checkout: str | None = None):
    env = {"PYTHONPATH": checkout_path(checkout)} if checkout else None
    options = settings.minibroker_options()
    if checkout:  # an older checkout may predate --client-telemetry, --authorizer and SASL
        for opt in ("client_telemetry", "authorizer", "super_users"):
            options.pop(opt)
    else:
        options.update(sasl_listener_options())
    with MiniBroker(name="differential", env=env, **options) as mb:
        yield mb


def sasl_listener_options() -> dict[str, object]:
    """PLAINTEXT and SASL_PLAINTEXT (PLAIN, settings.SASL_USERS) on free loopback ports, as the
    reference Kafka has them."""
    users = Path(tempfile.mkdtemp(prefix="differential-sasl-")) / "users"
    users.write_text("".join(f"{u}:{pw}\n" for u, pw in settings.SASL_USERS.items()))
    plain, sasl = free_port(), free_port()
    return {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl_users": users, "sasl_mechanisms": "PLAIN"}


@contextlib.contextmanager
def brokers(kafka: KafkaReference | None = None, checkout: str | None = None):
    """A ``Pair`` over a Kafka (started here unless given) and a new minibroker; sets ``machine.PAIR``."""
    with contextlib.ExitStack() as stack:
        if kafka is None:
            kafka = stack.enter_context(KafkaReference(settings.kafka_properties(), classpath=settings.kafka_classpath(),
                                                       sasl_users=settings.SASL_USERS))
        mb = stack.enter_context(minibroker_reference(checkout))
        pair = Pair(kafka.port, mb.port)
        # the SASL_PLAINTEXT listeners (tests/differential/test_acls.py), when both have one
        if kafka.sasl_port and len(mb.addresses) > 1:
            host, port = mb.addresses[1].rsplit(":", 1)
            pair.sasl = (("127.0.0.1", kafka.sasl_port), (host, int(port)))
        stack.callback(pair.close)
        machine.PAIR = pair
        try:
            yield pair, kafka, mb
        finally:
            machine.PAIR = None


def hypothesis_settings(examples: int, steps: int = 25):
    from hypothesis import HealthCheck, Phase
    from hypothesis import settings as hsettings

    return hsettings(max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=False,
                     suppress_health_check=list(HealthCheck), database=None,
                     phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink, Phase.explain],
                     print_blob=bool(os.environ.get("CI")))
