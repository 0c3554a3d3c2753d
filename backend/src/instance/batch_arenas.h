// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// BatchArenas: the backend's shared-memory arenas for batch inputs.
// Execute allocates (and announces new arenas to the stub); whoever ends a
// batch (the reader, or Execute for a batch that never reached the stub)
// frees its space.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "instance/batch.h"
#include "ipc/arena.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

struct BatchArenas {
  // `room`: what the stub can map (arena.h), shared with the BLS arenas.
  explicit BatchArenas(
      uint64_t arena_byte_size, std::shared_ptr<ArenaRoom> room = nullptr)
      : allocator(arena_byte_size, std::move(room))
  {
  }

  // Frees the arena space of `batch`.
  void Free(Batch* batch) EXCLUDES(mu)
  {
    if (batch->allocations.empty()) return;
    MutexLock lock(&mu);
    for (const Allocation& a : batch->allocations) {
      allocator.Free(a.arena_id, a.offset);
    }
    batch->allocations.clear();
  }

  Mutex mu;
  ArenaAllocator allocator GUARDED_BY(mu);
  // The stub generation the arenas were last announced to: a restarted
  // stub knows none of them.
  uint64_t announced_generation GUARDED_BY(mu) = 0;
};

}  // namespace tritonpy
