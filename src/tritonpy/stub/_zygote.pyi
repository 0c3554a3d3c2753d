# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _zygote.pyx."""

def can_fork() -> str: ...
def fork_stub(
    report_fd: int,
    go_fd: int,
    parent: int,
    sandbox: bool,
    max_processes: int,
    address_space: int,
    place: list[tuple[int, int]],
    null_stdin: bool,
    max_fd: int,
    own_network: bool = True,
) -> int: ...
def clone_spare() -> int: ...
def enter() -> tuple[int, int]: ...
def take_steps(
    report_fd: int,
    go_fd: int,
    parent: int,
    max_processes: int,
    address_space: int,
    place: list[tuple[int, int]],
    null_stdin: bool,
    max_fd: int,
    entered: tuple[int, int],
    keep: int = -1,
) -> None: ...
def clear_death_signal() -> None: ...
