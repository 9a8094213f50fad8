"""A real TLS front for a real engine in tests: terminates TLS with a given certificate on a
loopback port and forwards the bytes to a plain loopback server (as a reverse proxy in front
of someone else's llama-server would). Not a fake: both ends speak real protocols."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from pathlib import Path


class TlsFront:
    def __init__(self, cert: Path, key: Path, target_port: int, port: int) -> None:
        self.cert, self.key, self.target_port, self.port = cert, key, target_port, port
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._clients: set[asyncio.StreamWriter] = set()  # closed by stop(), as a restart would

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def start(self) -> TlsFront:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port, ssl=context), self._loop
        )
        self._server = future.result(10)
        return self

    async def _drop_clients(self) -> None:
        for writer in list(self._clients):
            writer.transport.abort()
        self._clients.clear()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            asyncio.run_coroutine_threadsafe(self._server.wait_closed(), self._loop).result(10)
        # A stopped server drops its open connections too (a client's pooled keep-alive
        # connection must not outlive the process it was talking to).
        asyncio.run_coroutine_threadsafe(self._drop_clients(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
