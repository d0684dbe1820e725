"""``compare.py --blob-memory``: Tabulae's RSS while one large blob (1 GiB by default) is uploaded
in a single Put Blob and downloaded again, both streamed by the client, so that only the
server's own buffering shows. Prints RSS before, the peak during each transfer, and the rates."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from pathlib import Path
from urllib.request import Request, urlopen

from blobs import VERSION, account_sas
from servers import TabulaeBlobServer
from signing import ACCOUNT

MIB = 1024 * 1024


def rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class Peak:
    def __init__(self, server: TabulaeBlobServer) -> None:
        self.server = server
        self.value = rss(server.pids())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.value = max(self.value, rss(self.server.pids()))
            time.sleep(0.02)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *args: object) -> None:
        self._stop.set()
        self._thread.join()


def run_blob_memory(size_mib: int, tabulae_args: str) -> int:
    server = TabulaeBlobServer(["--workers", "1", *tabulae_args.split()])
    server.start()
    try:
        sas = account_sas()
        base = f"http://{server.host}/{ACCOUNT}"
        urlopen(
            Request(f"{base}/memory?restype=container&{sas}", method="PUT", headers={"x-ms-version": VERSION})
        )
        piece = hashlib.sha512(b"tabulae").digest() * (MIB // 64)
        before = rss(server.pids())
        digest = hashlib.md5()
        with Peak(server) as upload:
            started = time.monotonic()
            host, port = server.host.split(":")
            with socket.create_connection((host, int(port)), timeout=600) as sock:
                head = (
                    f"PUT /{ACCOUNT}/memory/big?{sas} HTTP/1.1\r\nHost: {server.host}\r\n"
                    f"x-ms-version: {VERSION}\r\n"
                    f"x-ms-blob-type: BlockBlob\r\nContent-Length: {size_mib * MIB}\r\n\r\n"
                )
                sock.sendall(head.encode())
                for _ in range(size_mib):
                    sock.sendall(piece)
                    digest.update(piece)
                answer = sock.recv(4096)
            upload_seconds = time.monotonic() - started
        if not answer.startswith(b"HTTP/1.1 201"):
            print(f"upload failed: {answer[:300]!r}")
            return 1
        check = hashlib.md5()
        with Peak(server) as download:
            started = time.monotonic()
            with urlopen(
                Request(f"{base}/memory/big?{sas}", headers={"x-ms-version": VERSION}), timeout=600
            ) as response:
                while chunk := response.read(MIB):
                    check.update(chunk)
            download_seconds = time.monotonic() - started
        if check.digest() != digest.digest():
            print("download differs from the upload")
            return 1
        print(f"blob of {size_mib} MiB, one Put Blob and one Get Blob, Tabulae --workers 1 (SQLite):")
        print(f"  RSS before: {before / MIB:.0f} MiB")
        for label, peak, seconds in (
            ("upload:  ", upload, upload_seconds),
            ("download:", download, download_seconds),
        ):
            print(
                f"  {label} peak RSS {peak.value / MIB:.0f} MiB (+{(peak.value - before) / MIB:.0f} MiB), "
                f"{size_mib / seconds:,.0f} MiB/s"
            )
        return 0
    finally:
        server.stop()
