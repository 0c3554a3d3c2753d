# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Send concurrent requests to instance_kind and show which instance
answered each.

    python examples/instance_kind/client.py [--http localhost:8000] [--requests 12]

Exits non-zero if an instance reports a kind that is not its group's, or
if fewer than all three instances answered, each from a process of its own.

A process is told apart by its pid and its pid namespace, which the model
reports both. Unsandboxed, every stub shares the server's pid namespace
and the pids differ. Under ``stub-sandbox=true`` each stub is pid 1 of a
pid namespace of its own (docs/hardening.md): every instance then reports
pid 1, and the namespaces differ.
"""

import argparse
import collections
import sys

import numpy as np
import tritonclient.http as httpclient

# Instance name prefix (the group name) -> the kind the group declares.
GROUPS = {"cpu_pair": "CPU", "whole_model": "MODEL"}
INSTANCES = 3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--delay-ms", type=int, default=150)
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http, concurrency=args.requests)
    inp = httpclient.InferInput("DELAY_MS", [1], "INT32")
    inp.set_data_from_numpy(np.array([args.delay_ms], np.int32))
    pending = [client.async_infer("instance_kind", [inp]) for _ in range(args.requests)]
    answers = collections.defaultdict(list)
    ok = True
    for p in pending:
        result = p.get_result()
        instance = result.as_numpy("INSTANCE")[0].decode()
        kind = result.as_numpy("KIND")[0].decode()
        group = instance.rsplit("_", 1)[0]
        ok &= GROUPS.get(group) == kind
        process = (int(result.as_numpy("PID_NAMESPACE")[0]), int(result.as_numpy("PID")[0]))
        answers[(instance, kind, process)].append(1)
    client.close()
    for (instance, kind, (namespace, pid)), hits in sorted(answers.items()):
        right = GROUPS.get(instance.rsplit("_", 1)[0]) == kind
        print(
            f"{instance:14} kind {kind:6} pid {pid:7} (pid namespace {namespace}): "
            f"{len(hits)} requests  {'ok' if right else 'WRONG'}"
        )
    processes = {process for _, _, process in answers}
    names = {instance for instance, _, _ in answers}
    everyone = len(names) == INSTANCES and len(processes) == INSTANCES
    print(
        f"{len(names)} of {INSTANCES} instances answered, in {len(processes)} processes"
        f"  {'ok' if everyone else 'WRONG'}"
    )
    return 0 if ok and everyone else 1


if __name__ == "__main__":
    sys.exit(main())
