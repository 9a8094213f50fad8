"""A packet capture for the tests, without tcpdump: an AF_PACKET socket (root only) on one
interface records the TCP payload bytes of every IPv4 segment, by port, while the test runs.

`Capture(interface)` starts recording on a thread; `stop()` ends it; `payload(port)` is every
byte carried to or from that TCP port, `contains(secret)` and `count(secret, port)` search
them. It reads Linux link frames: Ethernet (type 0x0800) on a veth, and the same framing on
`lo`. Run as a script (`python -m tests.e2e.capture IFACE SECONDS OUT`) it records into OUT
as JSON {port: hex payload}, which is how a test captures inside a network namespace.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections import defaultdict

ETH_P_ALL = 0x0003
ETH_HEADER = 14


def available() -> str | None:
    """None when raw capture works here, else why not."""
    try:
        probe = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    except (OSError, AttributeError) as exc:
        return f"raw packet capture needs root on Linux ({type(exc).__name__})"
    probe.close()
    return None


def _segment(frame: bytes) -> tuple[int, int, bytes] | None:
    """(source port, destination port, TCP payload) of an IPv4 TCP frame, else None."""
    if len(frame) < ETH_HEADER + 20 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[ETH_HEADER:]
    header_len = (ip[0] & 0x0F) * 4
    if ip[0] >> 4 != 4 or ip[9] != 6 or len(ip) < header_len + 20:
        return None
    total = struct.unpack_from(">H", ip, 2)[0]
    tcp = ip[header_len:total]
    if len(tcp) < 20:
        return None
    source, destination = struct.unpack_from(">HH", tcp, 0)
    offset = (tcp[12] >> 4) * 4
    return source, destination, bytes(tcp[offset:])


class Capture:
    def __init__(self, interface: str) -> None:
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024 * 1024)
        self._sock.bind((interface, 0))
        self._sock.settimeout(0.2)
        self._by_port: dict[int, bytearray] = defaultdict(bytearray)
        self.frames = 0
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._running:
            try:
                frame, address = self._sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if address[2] == socket.PACKET_OUTGOING and address[0] == "lo":
                continue  # loopback shows each frame twice: keep the incoming copy
            found = _segment(frame)
            if found is None:
                continue
            self.frames += 1
            source, destination, payload = found
            if payload:
                self._by_port[source] += payload
                if destination != source:
                    self._by_port[destination] += payload

    def stop(self) -> None:
        self._running = False
        self._thread.join(2.0)
        self._sock.close()

    def payload(self, port: int) -> bytes:
        return bytes(self._by_port.get(port, b""))

    def ports(self) -> list[int]:
        return sorted(self._by_port)

    def count(self, secret: bytes, port: int | None = None) -> int:
        if port is not None:
            return self.payload(port).count(secret)
        return sum(bytes(b).count(secret) for b in self._by_port.values())

    def dump(self) -> dict[str, str]:
        return {str(port): bytes(data).hex() for port, data in self._by_port.items()}


def main(argv: list[str]) -> int:
    interface, seconds, out = argv[0], float(argv[1]), argv[2]
    capture = Capture(interface)
    print("capturing", flush=True)
    deadline = time.monotonic() + seconds
    stop_file = out + ".stop"
    while time.monotonic() < deadline:
        try:
            with open(stop_file):
                break
        except OSError:
            time.sleep(0.1)
    capture.stop()
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"frames": capture.frames, "ports": capture.dump()}, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
