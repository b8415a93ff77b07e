#!/usr/bin/env python3
"""Asks one Kafka broker for its metadata (a Metadata v1 request), or to
create topics (CreateTopics v2).

    kafka-probe.py HOST:PORT             exit 0 when it answers
    kafka-probe.py HOST:PORT --brokers N exit 0 when it lists N live brokers
    kafka-probe.py HOST:PORT --topics    print its topics, one a line
    kafka-probe.py HOST:PORT --create NAME:PARTITIONS:REPLICAS[:MIN_ISR] ...
                                         create each topic not there yet
    kafka-probe.py --uuid                print a new Kafka cluster id

stack.sh's readiness checks and set-up: a Kafka tool is a JVM that takes
one or two seconds of CPU to start, and the checks run every half second
while a broker starts; the stack's start made eight topics, one JVM each,
on its longest path. Metadata v1 is served by the stack's Kafka 3.9;
Kafka 4.0 drops it (KIP-896), so an upgrade of the stack's jars moves
this to v4 or later (CreateTopics v2 stays).
"""
import base64
import socket
import struct
import sys
import uuid

CLIENT = b"stack.sh"
TOPIC_ALREADY_EXISTS = 36


def call(host, port, api_key, version, body, timeout=5):
    # Request header v1: api key, version, correlation id, client id.
    req = struct.pack(">hhih", api_key, version, 1, len(CLIENT)) + CLIENT + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        size = struct.unpack(">i", read(s, 4))[0]
        return Reader(read(s, size))


def metadata(host, port, all_topics):
    # The topics: null for all of them, empty for none.
    return call(host, port, 3, 1, struct.pack(">i", -1 if all_topics else 0))


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def create(host, port, specs):
    """CreateTopics v2, every topic in one request; a topic already there
    is no error. Returns the topics' errors, by name."""
    body = struct.pack(">i", len(specs))
    for spec in specs:
        name, parts, replicas, *min_isr = spec.split(":")
        configs = [("min.insync.replicas", min_isr[0])] if min_isr else []
        body += string(name) + struct.pack(">ih", int(parts), int(replicas))
        body += struct.pack(">i", 0)  # no replica assignment
        body += struct.pack(">i", len(configs)) + b"".join(string(k) + string(v) for k, v in configs)
    body += struct.pack(">i?", 25000, False)  # timeout ms, validate only
    r = call(host, port, 19, 2, body, timeout=30)
    r.take(">i")  # correlation id
    r.take(">i")  # throttle time
    errors = {}
    for _ in range(r.take(">i")):
        name, code, message = r.string(), r.take(">h"), r.string()
        if code not in (0, TOPIC_ALREADY_EXISTS):
            errors[name] = f"error {code}: {message}"
    return errors


def new_cluster_id():
    # What Kafka's StorageTool random-uuid prints: 16 random bytes, URL-safe
    # base64 without padding, never one starting with "-" (a command line
    # would take it for an option).
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


def read(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("the broker closed the connection")
        buf += chunk
    return buf


class Reader:
    def __init__(self, buf):
        self.buf, self.at = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.buf[self.at:self.at + n].decode()
        self.at += n
        return s

    def array(self, item):
        return [item() for _ in range(max(self.take(">i"), 0))]


def main(argv):
    if argv[1:] == ["--uuid"]:
        print(new_cluster_id())
        return 0
    if len(argv) < 2 or ":" not in argv[1]:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[1].rsplit(":", 1)
    if "--create" in argv:
        errors = create(host, int(port), argv[argv.index("--create") + 1:])
        for name, err in errors.items():
            print(f"kafka-probe: topic {name}: {err}", file=sys.stderr)
        return 1 if errors else 0
    want_topics = "--topics" in argv
    r = metadata(host, int(port), want_topics)
    r.take(">i")  # correlation id
    brokers = r.array(lambda: (r.take(">i"), r.string(), r.take(">i"), r.string()))
    r.take(">i")  # controller id

    def partition():
        r.take(">h"), r.take(">i"), r.take(">i")
        r.array(lambda: r.take(">i"))
        r.array(lambda: r.take(">i"))

    def topic():
        error, name, _ = r.take(">h"), r.string(), r.take(">?")
        r.array(partition)
        return error, name

    topics = r.array(topic)
    if "--brokers" in argv:
        want = int(argv[argv.index("--brokers") + 1])
        return 0 if len(brokers) == want else 1
    if want_topics:
        for error, name in topics:
            if error == 0:
                print(name)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, EOFError, struct.error) as e:
        print(f"kafka-probe: {e}", file=sys.stderr)
        sys.exit(1)
