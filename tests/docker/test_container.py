"""The container image (docker/Dockerfile) and the compose environment (docker/compose.yaml).

No Docker engine here: the image is built and run with podman (rootful, private storage in a
temp dir, see podman.py), on a Debian base made with debootstrap (base_image.py), and the
compose file is driven by Debian's docker-compose 1.29 through ``podman system service``.
Test traffic from the host goes to 127.0.0.1 only: ports are published as
``-p 127.0.0.1:<free port>:9092``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid

import pytest

from .conftest import COMPOSE_FILE, MEASURED, REPO_ROOT, need_tools

pytestmark = pytest.mark.timeout(900)

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


SASL_COMPOSE_FILE = COMPOSE_FILE.with_name("compose.sasl.yaml")


def compose_cmd(*args: str, env: dict | None = None, timeout: float = 120,
                file=COMPOSE_FILE) -> subprocess.CompletedProcess:
    return subprocess.run(["docker-compose", "-f", str(file), *args], cwd=REPO_ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def compose_config(env: dict | None = None, file=COMPOSE_FILE) -> dict:
    """``docker-compose config`` (the file as compose reads it: anchors, merges and ${VARS}
    resolved) turned into a dict by the YAML module docker-compose itself runs on."""
    proc = compose_cmd("config", env=env, file=file)
    assert proc.returncode == 0, proc.stderr
    with open(shutil.which("docker-compose"), "rb") as f:
        interpreter = f.readline().decode().removeprefix("#!").strip().split()
    conv = subprocess.run([*interpreter, "-c",
                           "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
                          input=proc.stdout, stdout=subprocess.PIPE, text=True, timeout=60, check=True)
    return json.loads(conv.stdout)


# -- the compose file ----------------------------------------------------------------------------

def test_compose_file_is_valid():
    need_tools("docker-compose")
    proc = compose_cmd("config", "-q")
    assert proc.returncode == 0, f"docker-compose config -q: {proc.stderr}"


def test_compose_file_wiring():
    need_tools("docker-compose")
    port = str(free_port())
    cfg = compose_config(env={**os.environ, "MINIBROKER_HOST_PORT": port})
    services = cfg["services"]
    assert set(services) == {"minibroker", "producer", "pipeline", "consumer"}

    broker = services["minibroker"]
    assert broker["healthcheck"]["test"][:3] == ["CMD", "minibroker", "health"]
    env = broker["environment"]
    assert env["MINIBROKER_LISTENERS"] == "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092"
    # The host port follows MINIBROKER_HOST_PORT in both the published port and the advertised
    # address, so a host client is told the address it can reach.
    assert env["MINIBROKER_ADVERTISED_LISTENERS"] == \
        f"INTERNAL://minibroker:29092,EXTERNAL://localhost:{port}"
    assert any(p.startswith(f"127.0.0.1:{port}:9092") for p in broker["ports"]), broker["ports"]
    assert "minibroker-data:/var/lib/minibroker:rw" in broker["volumes"]
    assert "minibroker-data" in cfg["volumes"]

    for name in ("producer", "pipeline", "consumer"):
        svc = services[name]
        assert svc["depends_on"] == {"minibroker": {"condition": "service_healthy"}}, name
        assert "--bootstrap=minibroker:29092" in svc["command"], name
        assert svc["build"]["target"] == "examples"
    assert "/opt/examples/eos_pipeline.py" in services["pipeline"]["command"]


# -- the image -----------------------------------------------------------------------------------

def test_image_metadata(podman, broker_image):
    img = podman.inspect(broker_image, "image")
    cfg = img["Config"]
    hc = img.get("Healthcheck") or cfg.get("Healthcheck")   # podman: top level; docker: Config
    assert hc and hc["Test"][:3] == ["CMD", "minibroker", "health"], hc
    assert cfg["StopSignal"] == "SIGTERM"
    assert cfg["Entrypoint"] == ["minibroker"]          # exec form: minibroker is PID 1
    assert cfg["User"] == "minibroker"
    assert set(cfg["ExposedPorts"]) == {"9092/tcp", "29092/tcp", "8081/tcp"}  # 8081: the Schema Registry
    assert set(cfg["Volumes"]) == {"/var/lib/minibroker"}
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["MINIBROKER_DATA_DIR"] == "/var/lib/minibroker"
    assert env["MINIBROKER_HOST"] == "0.0.0.0"
    # pip is only needed to build: the image does not carry it.
    proc = podman.run("run", "--rm", "--entrypoint", "/opt/minibroker/bin/python", broker_image,
                      "-c", "import importlib.util as u; print(u.find_spec('pip'))", timeout=60)
    assert proc.stdout.decode().strip() == "None"


def _txn_produce(bootstrap: str, topic: str, txn_id: str, batches: list[tuple[list[str], bool]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    for values, commit in batches:
        p.begin_transaction()
        for v in values:
            p.produce(topic, key=b"k", value=v.encode())
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)  # onto the broker's log first: abort_transaction drops what is still queued
            p.abort_transaction(30)
    p.flush(30)


def _consume_all(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 30) -> list[str]:
    """Every record of partition 0 from the beginning, until ``expect`` came or the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and len(got) >= expect:  # _PARTITION_EOF
                    break
                continue
            got.append(m.value().decode())
    finally:
        c.close()
    return got


def _advertised(bootstrap: str) -> list[tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    return [(b.host, b.port) for b in md.brokers.values()]


def test_broker_container(podman, broker_image):
    """Run the image as a user would (-p, a named volume): health check, non-root PID 1,
    transactions and read_committed from the host, SIGTERM, data kept across containers."""
    run_id = uuid.uuid4().hex[:8]
    name = podman.container(f"mbtest-{run_id}-broker")
    volume = f"mbtest-{run_id}-data"
    port = free_port()
    bootstrap = f"{HOST}:{port}"
    run_args = ["run", "-d", "--name", name, "-p", f"{HOST}:{port}:9092",
                "-v", f"{volume}:/var/lib/minibroker",
                "-e", f"MINIBROKER_ADVERTISED_HOST={HOST}", "-e", f"MINIBROKER_ADVERTISED_PORT={port}",
                broker_image]

    t0 = time.monotonic()
    podman.run(*run_args)
    healthy_after = podman.wait_healthy(name, timeout=30)
    MEASURED["container start -> healthy (podman run -d until the HEALTHCHECK first passes)"] = \
        f"{time.monotonic() - t0:.2f} s"
    assert healthy_after < 30

    # The health command on its own, inside the container: 0 against the broker, 1 against a
    # port where nothing listens.
    ok = podman.run("exec", name, "minibroker", "health", check=False)
    assert ok.returncode == 0, ok.stderr
    assert b"healthy" in ok.stdout
    bad = podman.run("exec", name, "minibroker", "health", "--bootstrap", "localhost:1",
                     "--timeout", "2", check=False)
    assert bad.returncode == 1, (bad.stdout, bad.stderr)

    # Non-root, and the broker is PID 1 (so SIGTERM reaches it).
    assert podman.out("exec", name, "id", "-u").strip() != "0"
    cmdline = podman.out("exec", name, "cat", "/proc/1/cmdline").split("\0")
    assert any(part.endswith("minibroker") for part in cmdline), cmdline

    # A host client is told the published address.
    assert _advertised(bootstrap) == [(HOST, port)]

    # Transactions through the published port: committed, aborted, committed.
    topic = f"ctr-{run_id}"
    first = [f"a{i}" for i in range(10)]
    aborted = [f"x{i}" for i in range(5)]
    second = [f"b{i}" for i in range(10)]
    _txn_produce(bootstrap, topic, f"txn-{run_id}", [(first, True), (aborted, False), (second, True)])
    assert _consume_all(bootstrap, topic, "read_committed", 20) == first + second
    # read_uncommitted sees the aborted records: they were written, and filtered by the broker.
    assert sorted(_consume_all(bootstrap, topic, "read_uncommitted", 25)) == sorted(first + aborted + second)

    # The data is on the volume, written by the non-root user.
    owner = podman.out("exec", name, "stat", "-c", "%U", "/var/lib/minibroker/meta.properties").strip()
    assert owner == "minibroker"

    # SIGTERM (podman stop sends the image's STOPSIGNAL, then SIGKILL after -t seconds): the
    # broker flushes, closes and exits 0 well before the SIGKILL.
    t0 = time.monotonic()
    podman.run("stop", "-t", "20", name, timeout=60)
    stop_s = time.monotonic() - t0
    MEASURED["podman stop (SIGTERM -> exited)"] = f"{stop_s:.2f} s"
    state = podman.inspect(name)["State"]
    logs = podman.logs(name)
    assert state["ExitCode"] == 0, logs
    assert stop_s < 5, f"stop took {stop_s:.1f} s"
    assert "broker.stopped" in logs, logs

    # A new container on the same volume has everything, and the transactional id goes on.
    podman.run("rm", name)
    podman.run(*run_args)
    podman.wait_healthy(name, timeout=30)
    third = [f"c{i}" for i in range(10)]
    _txn_produce(bootstrap, topic, f"txn-{run_id}", [(third, True)])
    assert _consume_all(bootstrap, topic, "read_committed", 30) == first + second + third
    podman.run("rm", "-f", "-t", "5", name, timeout=60)
    podman.run("volume", "rm", volume)


def test_ephemeral_container(podman, broker_image):
    """The CI use: MINIBROKER_EPHEMERAL=true keeps data in a temp dir (writable by the non-root
    user) that is gone after a clean SIGTERM stop."""
    name = podman.container(f"mbtest-{uuid.uuid4().hex[:8]}-ephemeral")
    port = free_port()
    podman.run("run", "-d", "--name", name, "-p", f"{HOST}:{port}:9092",
               "-e", "MINIBROKER_EPHEMERAL=true", "-e", f"MINIBROKER_ADVERTISED_PORT={port}",
               "-e", f"MINIBROKER_ADVERTISED_HOST={HOST}", broker_image)
    podman.wait_healthy(name, timeout=30)
    topic = f"eph-{uuid.uuid4().hex[:8]}"
    _txn_produce(f"{HOST}:{port}", topic, f"eph-{port}", [(["v"], True)])
    assert _consume_all(f"{HOST}:{port}", topic, "read_committed", 1) == ["v"]
    # nothing went to the volume
    assert podman.out("exec", name, "ls", "-A", "/var/lib/minibroker").split() == []
    podman.run("stop", "-t", "20", name, timeout=60)
    assert podman.inspect(name)["State"]["ExitCode"] == 0, podman.logs(name)
    podman.run("rm", "-f", name)


def test_random_host_port_with_wait_for_config(podman, broker_image, tmp_path):
    """Testcontainers' case: the host port is chosen by the engine (``-p 127.0.0.1::9092``), so
    the broker cannot know it when it starts. The container waits for a properties file
    (``--wait-for-config``), the harness copies one in once it has read the mapped port (as
    Testcontainers' KafkaContainer copies its start script), and clients reach the broker
    through the mapped port: Metadata names it, not localhost:9092."""
    name = podman.container(f"mbtest-{uuid.uuid4().hex[:8]}-random-port")
    podman.run("run", "-d", "--name", name, "-p", f"{HOST}::9092",
               "-e", "MINIBROKER_EPHEMERAL=true", "-e", "KAFKA_NODE_ID=5",
               broker_image, "--wait-for-config", "/tmp/minibroker.properties")
    mapped = podman.out("port", name, "9092/tcp").strip().splitlines()[0]
    host, _, port_text = mapped.rpartition(":")
    port = int(port_text)
    assert host == HOST and port != 9092, mapped
    deadline = time.monotonic() + 30
    while "config.waiting_for_file" not in podman.logs(name):
        assert time.monotonic() < deadline, podman.logs(name)
        time.sleep(0.2)
    assert not podman.healthy(name, timeout=10)      # nothing listens before the file arrives

    t0 = time.monotonic()
    late = tmp_path / "minibroker.properties"
    late.write_text(f"advertised.listeners=PLAINTEXT://{HOST}:{port}\n")
    late.chmod(0o644)
    podman.run("cp", str(late), f"{name}:/tmp/minibroker.properties")
    podman.wait_healthy(name, timeout=30)
    MEASURED["random host port: file copied in -> healthy"] = f"{time.monotonic() - t0:.2f} s"

    bootstrap = f"{HOST}:{port}"
    assert _advertised(bootstrap) == [(HOST, port)]
    topic = f"rnd-{uuid.uuid4().hex[:8]}"
    committed = [f"r{i}" for i in range(10)]
    _txn_produce(bootstrap, topic, f"rnd-{port}", [(committed, True), (["x"], False)])
    assert _consume_all(bootstrap, topic, "read_committed", 10) == committed
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    assert list(md.brokers) == [5]                                   # KAFKA_NODE_ID
    logs = podman.logs(name)
    assert "config.file_arrived" in logs and "config.kafka_properties_applied" in logs, logs
    podman.run("stop", "-t", "20", name, timeout=60)
    assert podman.inspect(name)["State"]["ExitCode"] == 0, podman.logs(name)
    podman.run("rm", "-f", name)


@pytest.fixture(scope="session")
def testcontainers():
    # Session scope and listed first, so that it is set up before the session-scoped image
    # fixtures: no image build for a test that will skip.
    return pytest.importorskip("testcontainers", reason="testcontainers (pip) is not installed")


def test_testcontainers_python_recipe(testcontainers, podman, broker_image, monkeypatch):
    """docker/README.md's testcontainers-python block, run as written against podman's Docker
    API: the broker learns the mapped port and a client round trip goes through it."""
    from confluent_kafka import Producer

    readme = (REPO_ROOT / "docker" / "README.md").read_text()
    (block,) = re.findall(r"```python\n(from testcontainers.*?)```", readme, re.S)
    monkeypatch.setenv("DOCKER_HOST", podman.start_service())
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")     # no registry to pull it from
    # These machines look like containers themselves; the published ports are on this host.
    monkeypatch.setenv("TC_HOST", HOST)
    monkeypatch.setenv("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
    scope: dict = {}
    exec(compile(block, "docker/README.md", "exec"), scope)
    broker = scope["broker"]
    try:
        podman.container(broker.get_wrapped_container().name)
        bootstrap = scope["bootstrap"]
        host, _, port = bootstrap.rpartition(":")
        assert _advertised(bootstrap) == [(host, int(port))]
        topic = f"tc-{uuid.uuid4().hex[:8]}"
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            p.produce(topic, value=b"v%d" % i)
        assert p.flush(15) == 0
        assert _consume_all(bootstrap, topic, "read_committed", 3) == ["v0", "v1", "v2"]
    finally:
        broker.stop()


def test_dockerfile_build_args_do_not_warn(podman, base_image, tmp_path):
    """Building without the optional build arguments must not warn (buildah: 'missing
    "PIP_CERT" build argument'). Each stage's FROM and ARG lines are built on their own, so
    the check needs no network: it is the ARG declarations that warn."""
    from .conftest import DOCKERFILE

    skeleton, stages = [], []
    for line in DOCKERFILE.read_text().splitlines():
        word = line.split(" ", 1)[0].upper()
        if word == "FROM":
            if stages:
                skeleton.append("RUN true")
            stages.append(line.split()[-1])
            skeleton.append(line)
        elif word == "ARG":
            skeleton.append(line)
    skeleton.append("RUN true")
    (tmp_path / "Dockerfile").write_text("\n".join(skeleton) + "\n")
    assert len(stages) >= 3, stages
    for stage in stages:
        r = podman.run("build", "--format", "docker", "--build-arg", f"BASE={base_image}",
                       "--target", stage, "-t", f"localhost/mbtest-args-{stage}",
                       str(tmp_path), timeout=120)
        warnings = [x for x in r.stderr.decode().splitlines() if "warn" in x.lower()]
        assert warnings == [], (stage, warnings)


# -- the compose environment ---------------------------------------------------------------------

def test_compose_environment(podman, broker_image, examples_image):
    """``docker-compose up`` on docker/compose.yaml: the broker becomes healthy, the producer
    commits 8 transactions and aborts 2, the pipeline transforms the input exactly once, the
    read_committed consumer checks it and exits 0; a host client on the published listener
    reads the same output; the same container's Schema Registry serves Avro, JSON Schema and
    Protobuf pipelines from Python, JavaScript and Java clients (_registry_through_compose).
    Then ``down -v`` removes everything."""
    from tests.integration.clients import require_kafkajs
    from tests.integration.java_client import compile_drivers
    from tests.integration.registry_pipelines import JAVA_SRC_DIR, java_registry_toolchain

    # the second and third client languages, ready before the environment goes up
    require_kafkajs()
    tc = java_registry_toolchain()
    java = (tc, compile_drivers(tc, src_dir=JAVA_SRC_DIR))
    _compose_environment(podman, COMPOSE_FILE, "compose", java=java)


def test_compose_sasl_file_wiring():
    need_tools("docker-compose")
    cfg = compose_config(env={**os.environ, "MINIBROKER_HOST_PORT": "19092"}, file=SASL_COMPOSE_FILE)
    services = cfg["services"]
    assert set(services) == {"certs", "minibroker", "producer", "pipeline", "consumer"}
    env = services["minibroker"]["environment"]
    assert env["MINIBROKER_LISTENER_SECURITY_PROTOCOL_MAP"] == \
        "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL,HEALTH:PLAINTEXT"
    assert services["minibroker"]["depends_on"] == {"certs": {"condition": "service_completed_successfully"}}
    for name in ("producer", "pipeline", "consumer"):
        command = " ".join(services[name]["command"])
        assert "security.protocol=SASL_SSL" in command and "sasl.mechanism=SCRAM-SHA-512" in command


def test_compose_sasl_ssl_environment(podman, broker_image, examples_image, tmp_path):
    """docker/compose.sasl.yaml: the same environment with every client on SASL_SSL + SCRAM:
    certificates and users made by the one-shot certs service, the three services' transactions
    and exactly-once pipeline over SASL_SSL, and a host client with the CA copied out."""
    _compose_environment(podman, SASL_COMPOSE_FILE, "compose-sasl", tmp_path)


def _registry_through_compose(bootstrap: str, url: str, project: str, java) -> None:
    """Issue 34's "Done when" on the one container's published Kafka and registry ports: with
    schema evolution and a refused incompatible change (409) each time, confluent-kafka's Avro,
    JSON Schema and Protobuf serializers/deserializers; KafkaJS's schema-registry package for the
    three formats, crossing with confluent-kafka for Avro and JSON; and the Java side (kafka-clients
    with Apache Avro and Confluent's wire format) crossing with confluent-kafka for Avro. The
    pipelines are tests/integration/registry_pipelines.py's, which the integration tests run
    against a minibroker process."""
    from tests.integration.registry_pipelines import confluent_pipeline, java_pipeline, kafkajs_pipeline

    t0 = time.monotonic()
    ids = {kind: confluent_pipeline(bootstrap, url, f"{kind.lower()}-py-{project}", kind)
           for kind in ("AVRO", "JSON", "PROTOBUF")}
    js = {kind: kafkajs_pipeline(bootstrap, url, f"{kind.lower()}-js-{project}", kind)
          for kind in ("AVRO", "JSON", "PROTOBUF")}
    out = java_pipeline(bootstrap, url, f"avro-java-{project}", *java)
    # one registry for all: the same Avro v1 and v2 under three subjects (three clients) keep one id each
    assert js["AVRO"]["ids"] == out["ids"] == ids["AVRO"], (js["AVRO"], out, ids)
    assert js["JSON"]["ids"] == ids["JSON"], (js["JSON"], ids)
    MEASURED["compose: registry pipelines (3 formats x confluent-kafka + KafkaJS, Java Avro)"] = \
        f"{time.monotonic() - t0:.1f} s"


def _compose_environment(podman, file, label: str, tmp_path=None, java=None) -> None:
    need_tools("docker-compose")
    project = f"mbtest{uuid.uuid4().hex[:8]}"
    port, registry_port = free_port(), free_port()
    env = {**os.environ, "DOCKER_HOST": podman.start_service(), "MINIBROKER_HOST_PORT": str(port),
           "MINIBROKER_REGISTRY_HOST_PORT": str(registry_port), "COMPOSE_PROJECT_NAME": project}
    names = {svc: podman.container(f"{project}_{svc}_1")
             for svc in ("minibroker", "producer", "pipeline", "consumer")}
    sasl = file == SASL_COMPOSE_FILE
    if sasl:
        names["certs"] = podman.container(f"{project}_certs_1")
    try:
        t0 = time.monotonic()
        # The images exist (built above, tagged as compose.yaml names them): no build here.
        with podman.health_pump(names["minibroker"], interval=1.0) as pump:
            up = compose_cmd("up", "-d", "--no-build", env=env, timeout=180, file=file)
            assert up.returncode == 0, up.stdout + up.stderr
            MEASURED[f"{label} up -d (broker healthy, clients started)"] = f"{time.monotonic() - t0:.1f} s"
            assert pump.passes >= 1
            # The consumer exits by itself once it has the 80 committed records.
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                state = podman.inspect(names["consumer"])["State"]
                if state["Status"] == "exited":
                    break
                time.sleep(1)
            consumer_logs = podman.logs(names["consumer"])
            assert state["Status"] == "exited", consumer_logs
            assert state["ExitCode"] == 0, consumer_logs
            assert re.search(r"^OK: 80 records from 'WORDS' \(read_committed\)", consumer_logs, re.M), \
                consumer_logs
            MEASURED[f"{label}: up until the consumer verified 80 records"] = f"{time.monotonic() - t0:.1f} s"

            producer = podman.inspect(names["producer"])["State"]
            producer_logs = podman.logs(names["producer"])
            assert producer["ExitCode"] == 0, producer_logs
            assert "done: 80 records committed, 20 aborted" in producer_logs, producer_logs
            assert podman.inspect(names["pipeline"])["State"]["Status"] == "running", \
                podman.logs(names["pipeline"])
            assert "committed transaction" in podman.logs(names["pipeline"])

            # The EXTERNAL listener, from the host: advertised as localhost:<published port>.
            bootstrap = f"{HOST}:{port}"
            security = {}
            if sasl:
                # the certificate names minibroker and localhost (not 127.0.0.1): TLS checks it
                bootstrap = f"localhost:{port}"
                podman.out("cp", f"{names['minibroker']}:/certs/ca.crt", str(tmp_path / "ca.crt"))
                security = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(tmp_path / "ca.crt"),
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                            "sasl.password": "admin-secret"}
            else:
                assert _advertised(bootstrap) == [("localhost", port)]
            from confluent_kafka import Consumer

            c = Consumer({**security, "bootstrap.servers": bootstrap, "group.id": f"host-{project}",
                          "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                          # advertised "localhost" may resolve to ::1 first; the port is on 127.0.0.1
                          "broker.address.family": "v4"})
            c.subscribe(["WORDS"])
            values: list[str] = []
            deadline = time.monotonic() + 60
            try:
                while len(values) < 80 and time.monotonic() < deadline:
                    m = c.poll(0.5)
                    if m is not None and not m.error():
                        values.append(m.value().decode())
            finally:
                c.close()
            assert len(values) == 80 and len(set(values)) == 80, values
            assert all(v == v.upper() and "ABORTED" not in v for v in values), values
            if java is not None:
                _registry_through_compose(bootstrap, f"http://{HOST}:{registry_port}", project, java)
    finally:
        t0 = time.monotonic()
        down = compose_cmd("down", "-v", "--timeout", "20", env=env, timeout=180, file=file)
        MEASURED[f"{label} down -v"] = f"{time.monotonic() - t0:.1f} s"
    assert down.returncode == 0, down.stdout + down.stderr
    left = podman.out("ps", "-a", "--filter", f"name={project}", "--format", "{{.Names}}").split()
    assert left == [], left
    volumes = podman.out("volume", "ls", "--format", "{{.Name}}").split()
    assert not [v for v in volumes if v.startswith(project)], volumes
