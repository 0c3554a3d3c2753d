# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/sse_load.py's HTTP reader on answers cut at every byte: an
event, a chunk header or the body's terminator split across reads is
still read whole, and an answer cut short is an error, never a stream
that ended. The server here writes fixed bytes (what Triton's front end
sends, chunked, one event per chunk); tests/integration/test_sse_streams.py
runs the same client against a real tritonserver."""

import asyncio

from bench import sse_load

TOKENS = 3


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def answer(events: list[bytes], end: bool = True) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    body = b"".join(_chunk(b"data: " + e + b"\n\n") for e in events)
    return head + body + (b"0\r\n\r\n" if end else b"")


TOKEN_EVENTS = [b'{"ID":7,"TOKEN":%d,"model_name":"m","model_version":"1"}' % i for i in range(3)]


async def _read(raw: bytes, piece: int) -> sse_load.Stream:
    """What read_stream makes of ``raw`` written ``piece`` bytes at a time
    (then the connection closed)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for i in range(0, len(raw), piece):
            writer.write(raw[i : i + piece])
            await writer.drain()
            await asyncio.sleep(0)  # let each piece be a read of its own
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await sse_load.read_stream(
            f"127.0.0.1:{port}", "/v2/models/m/generate_stream", {"N": TOKENS}, limit=30
        )


def test_every_split_of_a_whole_answer_reads_every_token() -> None:
    raw = answer(TOKEN_EVENTS)
    for piece in (1, 2, 3, 5, 7, 11, 64, len(raw)):
        s = asyncio.run(_read(raw, piece))
        assert sse_load.token_problem(s, 7, TOKENS) is None, (piece, s)
        assert s.ttft_us is not None and len(s.itl_us) == TOKENS - 1


def test_an_answer_cut_before_its_terminator_is_an_error() -> None:
    for piece in (1, 9):
        s = asyncio.run(_read(answer(TOKEN_EVENTS, end=False), piece))
        assert not s.ended and s.error is not None, (piece, s)
        assert "mid-stream" in s.error and len(s.events) == TOKENS
        assert "mid-stream" in (sse_load.token_problem(s, 7, TOKENS) or "")


def test_an_error_event_and_a_refusal_are_errors() -> None:
    s = asyncio.run(_read(answer([TOKEN_EVENTS[0], b'{"error":"the model broke"}']), 4))
    assert s.error == "error event: the model broke" and len(s.events) == 1
    refused = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 17\r\n\r\n" + b'{"error":"nope!"}'
    s = asyncio.run(_read(refused, 5))
    assert s.status == 400 and s.error == 'HTTP 400: {"error":"nope!"}', s


def test_an_event_that_is_not_json_is_an_error_naming_it() -> None:
    s = asyncio.run(_read(answer([TOKEN_EVENTS[0], b"{not json"]), 6))
    assert s.error is not None and "not JSON" in s.error and "{not json" in s.error, s
    assert len(s.events) == 1


def test_an_event_that_is_json_but_not_an_object_is_an_error_naming_it() -> None:
    s = asyncio.run(_read(answer([TOKEN_EVENTS[0], b"[5]"]), len(TOKEN_EVENTS[0]) * 4))
    assert s.error is not None and "not an object" in s.error and "[5]" in s.error, s
    assert len(s.events) == 1
