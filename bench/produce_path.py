"""CPU per Produce request on the broker's own path, without sockets or a load generator.

``python -m bench.produce_path [--records N] [--size B] [--partitions P] [--requests R]
[--version V] [--profile FILE] [--baseline DIR] [--socket [--window W] | --handler]``: an
in-process broker (fsync never, a temp data dir) is handed R idempotent Produce requests,
each with P partitions of one batch of N records of B bytes, straight to its dispatcher, as
the connection does after reading a frame; the answer is encoded but not sent. It prints the
process CPU seconds (user+system, from getrusage) per request, per batch and per GB of
records. What it leaves out is the socket: the kernel's copy of the request in and of the
answer out, and the event loop's wake-ups.

``--handler`` hands the same requests, decoded beforehand, to the Produce handler alone: what
the append path costs (the handler's checks, storage, the answer's encoding) without the
request header, the decoding and the dispatcher.

The machine's load does not change CPU seconds much, unlike MB/s: this is the number to compare
before and after a change of the produce path (``--baseline DIR`` runs another checkout's code
the same way, alternating with this tree's, and prints both).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _user() -> float:
    # the user part: the Python (and C libraries) rather than the kernel's copies and calls
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


async def _run(a) -> dict:
    from kio.index import load_request_schema
    from kio.serial import entity_reader

    from minibroker.app import start
    from minibroker.config.options import Config, FsyncPolicy
    from minibroker.handlers.common import partition_log
    from minibroker_protocol import checksum, codec
    from minibroker_protocol.build import build, nested
    from minibroker_protocol.header import read_uvarint
    from minibroker_protocol.records import build_batch

    with tempfile.TemporaryDirectory(prefix="produce-path-") as tmp:
        cfg = Config(port=0, host="127.0.0.1", data_dir=Path(tmp) / "data",
                     fsync=FsyncPolicy("never"), num_partitions=a.partitions)
        running = await start(cfg)
        try:
            dispatcher = running.servers[0].factory().dispatcher

            class Conn:  # what the dispatcher reads of a connection
                auth = None
                conn_id = "bench"
                listener = None

            conn = Conn()
            corr = 0

            async def call(entity):
                nonlocal corr
                corr += 1
                body = codec.encode_request(entity, corr, "bench")
                answer = dispatcher.handle(memoryview(body), conn)
                if asyncio.iscoroutine(answer):
                    answer = await answer
                return answer

            def req(key, version, **fields):
                return build(load_request_schema(key, version), **fields)

            cls = load_request_schema(19, 7)
            await call(build(cls, topics=(build(nested(cls, "CreatableTopic"), name="t",
                                                num_partitions=a.partitions, replication_factor=1,
                                                assignments=(), configs=()),),
                             timeout=datetime.timedelta(seconds=5), validate_only=False))
            init = await call(req(22, 4, transactional_id=None,
                                  transaction_timeout=datetime.timedelta(seconds=60),
                                  producer_id=-1, producer_epoch=-1))
            data = init.chunks[0]
            _n, pos = read_uvarint(data, 4)
            resp, _ = entity_reader(codec.response_type(22, 4))(memoryview(data)[pos:], 0)
            pid, epoch = int(resp.producer_id), int(resp.producer_epoch)
            value = os.urandom(a.size)
            template = bytearray(build_batch([(None, value)] * a.records, producer_id=pid,
                                             producer_epoch=epoch, base_sequence=0))
            cls = load_request_schema(0, a.version)
            T, P = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
            seq = [0] * a.partitions
            topic_id = running.broker.logs.topic("t").topic_id  # what v13 names the topic by
            frames = []
            for _ in range(a.requests + a.warmup):
                parts = []
                for p in range(a.partitions):
                    b = bytearray(template)
                    struct.pack_into(">i", b, 53, seq[p])
                    seq[p] += a.records
                    struct.pack_into(">I", b, 17, checksum.crc32c(memoryview(b)[21:]))
                    parts.append(build(P, index=p, records=bytes(b)))
                e = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                          topic_data=(build(T, name="t", topic_id=topic_id, partition_data=tuple(parts)),))
                corr += 1
                frames.append(memoryview(codec.encode_request(e, corr, "bench")))
            for f in frames[:a.warmup]:
                dispatcher.handle(f, conn)
            frames = frames[a.warmup:]
            calls = []
            if a.handler:
                # the Produce handler alone, on requests decoded beforehand (and before a
                # --profile starts): the append path (handler, storage, answer encoding)
                # without the header, decoding and dispatch
                from minibroker.handlers.api import RequestContext
                from minibroker_protocol.header import read_request_header
                from minibroker_protocol.produce import decode_produce
                api = dispatcher.apis[0]
                if api.load is not None:
                    api = dispatcher._loaded(api)
                flexible = codec.is_flexible_request(0, a.version)
                for f in frames:
                    body = f[read_request_header(f, flexible).body_offset:]
                    calls.append((RequestContext(0, a.version, 1, "bench", conn),
                                  decode_produce(body, a.version)))
                handler = api.handler
            prof = None
            if a.profile:
                import cProfile
                prof = cProfile.Profile(time.process_time)  # CPU time: a loaded machine does not skew it
                prof.enable()
            if a.socket:
                # the same frames from another process over loopback TCP: what the connection,
                # the event loop and the kernel's socket calls add per request
                path = Path(tmp) / "frames"
                with open(path, "wb") as out:
                    for f in frames:
                        out.write(struct.pack(">i", len(f)))
                        out.write(f)
                sender = await asyncio.create_subprocess_exec(
                    sys.executable, os.path.abspath(__file__), "--send", str(path), str(running.port),
                    str(len(frames)), str(a.window))
                c0, u0, t0 = _cpu(), _user(), time.perf_counter()
                if await sender.wait() != 0:
                    raise RuntimeError("the sender failed")
                c1, u1, t1 = _cpu(), _user(), time.perf_counter()
            elif a.handler:
                c0, u0, t0 = _cpu(), _user(), time.perf_counter()
                for ctx, request in calls:
                    handler(ctx, request)
                c1, u1, t1 = _cpu(), _user(), time.perf_counter()
            else:
                c0, u0, t0 = _cpu(), _user(), time.perf_counter()
                for f in frames:
                    dispatcher.handle(f, conn)
                c1, u1, t1 = _cpu(), _user(), time.perf_counter()
            if prof is not None:
                prof.disable()
                prof.dump_stats(a.profile)
            # every partition took every batch: the log end is requests * records
            logs = running.broker.logs
            ends = [partition_log(logs, "t", p).log_end_offset for p in range(a.partitions)]
            want = (a.requests + a.warmup) * a.records
            if ends != [want] * a.partitions:
                raise RuntimeError(f"log end offsets {ends}, expected {want} each")
        finally:
            await running.close()
    gb = a.requests * a.partitions * a.records * a.size / 1e9
    n = a.requests
    return {"cpu_s": c1 - c0, "wall_s": t1 - t0, "us_per_request": (c1 - c0) / n * 1e6,
            "user_us_per_request": (u1 - u0) / n * 1e6,
            "us_per_batch": (c1 - c0) / (n * a.partitions) * 1e6, "cpu_s_per_gb": (c1 - c0) / gb}


def _send(path: str, port: int, count: int, window: int) -> int:
    """--send: write the frames in ``path`` to the broker, at most ``window`` unanswered."""
    import socket
    data = memoryview(open(path, "rb").read())
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    pos = sent = answered = 0
    while answered < count:
        while sent < count and sent - answered < window:
            (size,) = struct.unpack_from(">i", data, pos)
            s.sendall(data[pos:pos + 4 + size])
            pos += 4 + size
            sent += 1
        (size,) = struct.unpack(">i", f.read(4))
        if len(f.read(size)) != size:
            return 1
        answered += 1
    s.close()
    return 0


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--send":
        return _send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000, help="records per batch")
    ap.add_argument("--size", type=int, default=100, help="bytes per record value")
    ap.add_argument("--partitions", type=int, default=1, help="batches (partitions) per request")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--version", type=int, default=9, help="Produce request version")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", metavar="FILE", help="cProfile the timed loop into FILE")
    ap.add_argument("--socket", action="store_true",
                    help="send the requests over loopback TCP from another process (the broker's CPU is "
                         "still what is measured), not straight to the dispatcher")
    ap.add_argument("--handler", action="store_true",
                    help="time the Produce handler alone on requests decoded beforehand")
    ap.add_argument("--window", type=int, default=1, help="--socket: requests in flight")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout, run alternately")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        try:  # the broker's own loop (minibroker/app.py runs under uvloop where it is installed)
            import uvloop
            result = uvloop.run(_run(a))
        except ImportError:
            result = asyncio.run(_run(a))
        print(json.dumps(result))
        return 0
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("this tree", here)] + ([("baseline", os.path.abspath(a.baseline))] if a.baseline else [])
    argv = [x for x in sys.argv[1:] if not x.startswith("--baseline") and x != a.baseline]
    runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for rep in range(a.reps):
        for name, root in (trees if rep % 2 == 0 else trees[::-1]):
            env = dict(os.environ)
            if root != here:
                sys.path.insert(0, here)
                from tests.reference.checkout import checkout_path
                env["PYTHONPATH"] = checkout_path(root)
            # run as a script from the tree it measures: the working directory is then not on
            # sys.path, and the baseline's packages come from its PYTHONPATH alone
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--child"],
                                 cwd=root, env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:  # its traceback is the message
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(r)
            print(f"rep {rep + 1} {name}: {r['us_per_request']:.1f} us/request, "
                  f"{r['cpu_s_per_gb']:.3f} s/GB", file=sys.stderr, flush=True)
    for name, rs in runs.items():
        med = sorted(rs, key=lambda r: r["cpu_s"])[len(rs) // 2]
        user = sorted(r["user_us_per_request"] for r in rs)[len(rs) // 2]
        print(f"{name}: median of {len(rs)}: {med['us_per_request']:.1f} us CPU per request "
              f"(median user part {user:.1f} us), "
              f"{med['us_per_batch']:.1f} us per batch, {med['cpu_s_per_gb']:.3f} s per GB "
              f"({a.records} records of {a.size} B per batch, {a.partitions} per request, "
              f"Produce v{a.version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
