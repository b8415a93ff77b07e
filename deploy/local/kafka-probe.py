#!/usr/bin/env python3
"""Asks one Kafka broker for its metadata (a Metadata v1 request).

    kafka-probe.py HOST:PORT             exit 0 when it answers
    kafka-probe.py HOST:PORT --brokers N exit 0 when it lists N live brokers
    kafka-probe.py HOST:PORT --topics    print its topics, one a line

stack.sh's readiness checks: a Kafka tool is a JVM that takes seconds of
CPU to start, and the checks run every half second while a broker starts.
Metadata v1 is served by the stack's Kafka 3.9; Kafka 4.0 drops it
(KIP-896), so an upgrade of the stack's jars moves this to v4 or later.
"""
import socket
import struct
import sys


def metadata(host, port, all_topics):
    # Header v1: api key 3 (Metadata), version 1, correlation id, client id;
    # body: the topics, null for all of them, empty for none.
    client = b"stack.sh"
    body = struct.pack(">hhih", 3, 1, 1, len(client)) + client + struct.pack(">i", -1 if all_topics else 0)
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", read(s, 4))[0]
        return Reader(read(s, size))


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
    if len(argv) < 2 or ":" not in argv[1]:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[1].rsplit(":", 1)
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
