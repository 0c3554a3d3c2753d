# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Channel.turn: one wait of a thread that reads the socket in turn (a
blocking BLS call), its first part spent polling without sleeping."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tritonpy.stub._channel import Channel


class Receiver:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def on_frame(self, view: Any, fds: list[int], more: bool) -> bool:
        self.frames.append(bytes(view))
        return False

    def drained(self) -> None:
        pass


@pytest.fixture
def pair() -> Iterator[tuple[Channel, socket.socket, Receiver, int]]:
    ours, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    loop = asyncio.new_event_loop()
    ch = Channel(ours.detach(), loop, lambda why: None, lambda message: None)
    receiver = Receiver()
    ch.start(receiver)
    wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    yield ch, peer, receiver, wake
    ch.close()
    peer.close()
    os.close(wake)
    loop.close()


def test_a_spin_that_catches_nothing_says_so(pair: tuple) -> None:
    ch, _peer, receiver, wake = pair
    assert ch.turn(wake, 0.0, 1_000_000) is False
    assert ch.turn(wake, 0.0) is False  # no spin at all
    assert receiver.frames == []


def test_a_frame_sent_during_the_spin_ends_it_and_is_handed_over(pair: tuple) -> None:
    ch, peer, receiver, wake = pair
    sender = threading.Timer(0.01, peer.send, (b"frame",))
    sender.start()
    try:
        # A spin far longer than the frame takes to come: it ends with it.
        assert ch.turn(wake, 30.0, 30_000_000_000) is True
    finally:
        sender.join()
    assert receiver.frames == [b"frame"]


def test_the_wake_fd_ends_a_spin_and_is_reset(pair: tuple) -> None:
    ch, _peer, receiver, wake = pair
    waker = threading.Timer(0.01, os.eventfd_write, (wake, 1))
    waker.start()
    try:
        assert ch.turn(wake, 30.0, 30_000_000_000) is True
    finally:
        waker.join()
    with pytest.raises(BlockingIOError):
        os.eventfd_read(wake)  # read by the turn
    assert receiver.frames == []


def test_a_spin_longer_than_the_wait_ends_with_it(pair: tuple) -> None:
    """The spin is part of the turn's wait: a spin of ten minutes in a turn
    of 50 ms ends with the turn (nothing comes meanwhile)."""
    ch, _peer, receiver, wake = pair
    got: list[bool] = []
    turn = threading.Thread(target=lambda: got.append(ch.turn(wake, 0.05, 600_000_000_000)))
    turn.start()
    turn.join(60)  # a spin past its turn would still be running
    assert not turn.is_alive() and got == [False]
    assert receiver.frames == []
