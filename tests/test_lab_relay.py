"""The UDP relay on real loopback sockets (bounded in time)."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from quicsm.lab.link import LinkConfig
from quicsm.lab.relay import Relay, RelayConfig, parse_address

HEADER = struct.Struct("!Id")


def _queued_bytes(port: int) -> int:
    """Bytes waiting in the receive queue of the UDP socket bound to 127.0.0.1:``port``."""
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}":
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"no UDP socket on 127.0.0.1:{port}")


def _echo_server(stop: threading.Event) -> tuple[socket.socket, threading.Thread]:
    """A UDP server on 127.0.0.1 that sends every datagram back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.05)

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(65535)
            except TimeoutError:
                continue
            sock.sendto(data, addr)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return sock, thread


def test_relay_round_trip_delay_loss_and_counters() -> None:
    stop = threading.Event()
    echo, echo_thread = _echo_server(stop)
    config = RelayConfig(
        listen=("127.0.0.1", 0),
        target=echo.getsockname(),
        up=LinkConfig(delay_ms=15, loss=0.1),
        down=LinkConfig(delay_ms=5),
        seed=42,
    )
    relay = Relay(config)
    relay_thread = threading.Thread(
        target=relay.serve, kwargs={"should_stop": stop.is_set, "poll_s": 0.01}, daemon=True
    )
    relay_thread.start()
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(0.05)
    n = 300
    rtts: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while not done.is_set():
            try:
                data = client.recv(65535)
            except TimeoutError:
                continue
            _, sent = HEADER.unpack_from(data)
            rtts.append(time.monotonic() - sent)

    def settled() -> bool:
        """Every datagram sent has been relayed or dropped both ways, and every echo read:
        waited for by count, not by time, so that a starved process only takes longer."""
        c = relay.counters()
        up, down = c["up"], c["down"]
        return (
            up["packets_in"] == n
            and up["dropped_loss"] + up["delivered"] == n
            and down["packets_in"] == up["delivered"]
            and down["dropped_loss"] + down["delivered"] == down["packets_in"]
            and len(rtts) == down["delivered"]
        )

    receiver = threading.Thread(target=receive, daemon=True)
    try:
        client.sendto(HEADER.pack(0, time.monotonic()) + bytes(500), relay.address)
        receiver.start()
        for seq in range(1, n):
            time.sleep(0.001)
            client.sendto(HEADER.pack(seq, time.monotonic()) + bytes(500), relay.address)
        give_up = time.monotonic() + 120  # only against a hang: a loaded machine is slow
        while not settled():
            assert time.monotonic() < give_up, relay.counters()
            time.sleep(0.05)
    finally:
        done.set()
        receiver.join(timeout=5)
        stop.set()
        relay_thread.join(timeout=5)
        echo_thread.join(timeout=5)
        relay.close()
        echo.close()
        client.close()
    counters = relay.counters()
    up, down = counters["up"], counters["down"]
    assert up["packets_in"] == n
    assert up["dropped_loss"] + up["delivered"] == n
    assert 0.04 * n < up["dropped_loss"] < 0.18 * n
    assert down["packets_in"] == up["delivered"] == down["delivered"] == len(rtts)
    assert counters["clients"] == 1 and counters["send_errors"] == 0
    # 20 ms added round trip, never less; how little the relay adds on top is measured by
    # benchmarks/bench_relay.py (here a loaded machine may add any amount)
    assert min(rtts) >= 0.020
    assert up["mean_delay_ms"] == pytest.approx(15, abs=1e-6)


def test_relay_process_prints_ready_and_writes_counters_on_sigterm(tmp_path: Path) -> None:
    cfg = tmp_path / "relay.json"
    cfg.write_text(json.dumps({"up": {"loss": 0.5}, "down": {}}))
    stats = tmp_path / "stats.json"
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicsm.lab.relay",
            "--target",
            f"127.0.0.1:{sink.getsockname()[1]}",
            "--config",
            str(cfg),
            "--seed",
            "3",
            "--stats",
            str(stats),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready 127.0.0.1:")
        addr = parse_address(line.split()[1])
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(200):
            tx.sendto(b"x" * 100, addr)
        # loopback queues each datagram at once: wait until the relay has read them all (by
        # its socket's queue, not by time: a starved relay only takes longer)
        give_up = time.monotonic() + 120
        while _queued_bytes(addr[1]):
            assert time.monotonic() < give_up, "the relay never read its datagrams"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        sink.close()
    assert proc.returncode == 0
    counters = json.loads(stats.read_text())
    assert counters["up"]["packets_in"] == 200
    assert 60 < counters["up"]["dropped_loss"] < 140


def test_relay_config_errors_name_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"up": {"jitter_ms": -1}}))
    proc = subprocess.run(
        [sys.executable, "-m", "quicsm.lab.relay", "--target", "127.0.0.1:9", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert "bad.json: up" in proc.stderr and "jitter_ms must be >= 0" in proc.stderr
