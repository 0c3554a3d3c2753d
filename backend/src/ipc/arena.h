// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Shared-memory arenas (docs/protocol.md, "Arenas and who frees what").
//
// ArenaAllocator owns the backend's arenas: anonymous memfds (mode 0600,
// close-on-exec, never named in /dev/shm) mapped read-write, carved by a
// first-fit allocator with coalescing and 64-byte alignment. When nothing
// fits it adds an arena of max(default_size, 2 * request), or less when
// the stub could not map that much (ArenaRoom). Freed space in
// the first kKeepResidentBytes of the arenas (in creation order) stays
// resident: first-fit reuses it, so repeated large tensors touch pages
// that are already mapped in both processes (no page faults, no zeroing).
// Freed runs of at least kPunchHoleMinBytes beyond that are punched out of
// the memfd so their pages go back to the OS.
//
// PeerArenas holds read-only mappings of the stub's arenas and resolves
// (arena_id, offset, size) references with overflow-safe bounds checks.
// It maps only sealed tmpfs memfds, and no more of them (count and bytes)
// than the stub's limits allow (StubLimits, backend settings).
//
// Neither class locks: each is used by one thread at a time (the owner
// documents which).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/error.h"

namespace tritonpy {

constexpr uint64_t kArenaAlignment = 64;
constexpr uint64_t kPunchHoleMinBytes = 1 << 20;
constexpr uint64_t kKeepResidentBytes = 64 << 20;

// What one stub may make the backend map, decode or hold
// (docs/configuration.md, docs/hardening.md). Passing one of the first
// three is a protocol violation that names the key; the others are caps an
// honest model could meet, which fail only what passes them.
struct StubLimits {
  // `stub-max-arenas`: arenas a stub may announce (each is one mapping,
  // counted against the kernel's vm.max_map_count).
  uint64_t max_arenas = 1024;
  // `stub-max-arena-bytes`: bytes of all its announced arenas together.
  // The backend's default is the machine's memory (machine_memory.h); this
  // one stands when that cannot be read.
  uint64_t max_arena_bytes = 256ull << 30;
  // `stub-max-body-bytes`: the largest frame body it may place in an arena.
  uint64_t max_body_bytes = 64ull << 20;
  // `stub-max-bls-calls`: BLS calls of one stub in flight; past it a new
  // call fails (bls.cc).
  uint64_t max_bls_calls = 4096;
  // `stub-max-bls-bytes`: BLS data the backend holds for one stub (input
  // copies of its calls in flight, outputs in BLS arenas it has not
  // released); past it a call or an output fails. The backend's default is
  // a quarter of the machine's memory; this one stands when that cannot be
  // read.
  uint64_t max_bls_bytes = 64ull << 30;
  // `stub-log-bytes-per-second`: LOG volume of one stub the backend passes
  // to Triton's log (log_limiter.h); the rest is dropped and counted.
  uint64_t log_bytes_per_second = 4ull << 20;
};

// What a stub and the processes it forked (BLS_CHANNEL) hold together,
// counted against one set of StubLimits, so that forking multiplies no
// cap: BLS calls and BLS bytes of the stub and its children together, and
// the arenas of its children together (not the stub's own, which its
// allocator keeps within the limits itself: a child's arenas must not make
// an honest stub break them). Each holder adds what it holds and takes it
// back when it lets go (any thread). Two holders checking at the same
// moment may together pass a cap by one call's or one arena's worth.
struct StubUsage {
  std::atomic<uint64_t> bls_calls{0};
  std::atomic<uint64_t> bls_bytes{0};
  std::atomic<uint64_t> arenas{0};
  std::atomic<uint64_t> arena_bytes{0};
};

// One memfd mapping. Owns the descriptor and the mapping.
class MappedArena {
 public:
  // Creates a new memfd of `size` bytes, mapped read-write.
  static Status Create(
      uint32_t id, uint64_t size, std::unique_ptr<MappedArena>* out);
  // Maps `fd` (size bytes). Takes ownership of fd; closes it after mapping
  // unless keep_fd.
  static Status Map(
      uint32_t id, int fd, uint64_t size, bool writable, bool keep_fd,
      std::unique_ptr<MappedArena>* out);
  ~MappedArena();
  MappedArena(const MappedArena&) = delete;
  MappedArena& operator=(const MappedArena&) = delete;

  uint32_t id() const { return id_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  uint8_t* base() const { return base_; }

 private:
  MappedArena(uint32_t id, int fd, uint8_t* base, uint64_t size)
      : id_(id), fd_(fd), base_(base), size_(size)
  {
  }
  uint32_t id_;
  int fd_;
  uint8_t* base_;
  uint64_t size_;
};

// The bytes of backend arenas one stub maps (batch inputs and BLS outputs
// together), and the most it can map: under the sandbox's address-space
// limit (RLIMIT_AS) half of it, the other half left to the interpreter,
// its libraries and the model. Shared by an instance's allocators: an
// arena takes its size when made and gives it back with its allocator.
class ArenaRoom {
 public:
  // `why` says where `limit` comes from, for errors.
  ArenaRoom(uint64_t limit, std::string why)
      : limit_(limit), why_(std::move(why))
  {
  }
  // Takes the most of `most` bytes there is room for, if at least
  // `least`: the bytes taken, or 0.
  uint64_t Take(uint64_t least, uint64_t most);
  void Give(uint64_t bytes) { used_.fetch_sub(bytes); }
  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(); }
  const std::string& why() const { return why_; }

 private:
  const uint64_t limit_;
  const std::string why_;
  std::atomic<uint64_t> used_{0};
};

struct Allocation {
  uint32_t arena_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint8_t* ptr = nullptr;
};

class ArenaAllocator {
 public:
  // `room`: what the stub can map, shared with the instance's other
  // allocator (none: no limit but the memory's).
  explicit ArenaAllocator(
      uint64_t default_arena_size, std::shared_ptr<ArenaRoom> room = nullptr);
  ~ArenaAllocator();  // gives its arenas' bytes back to the room
  ArenaAllocator(const ArenaAllocator&) = delete;
  ArenaAllocator& operator=(const ArenaAllocator&) = delete;

  // Allocates `size` bytes (rounded up to 64). Creates an arena when
  // nothing fits; new arenas are remembered as unannounced. An arena is
  // never larger than the room left: past it the allocation fails
  // (INVALID_ARG when `size` alone is more than the room's limit,
  // UNAVAILABLE when the arenas made meanwhile took the room), saying
  // why, without the official prefix (the caller names the tensor).
  Status Allocate(uint64_t size, Allocation* out);
  // Frees an allocation made by Allocate. Unknown references are ignored.
  void Free(uint32_t arena_id, uint64_t offset);

  // Arenas the peer has not been told about yet (ARENA frames to send).
  // MarkAnnounced is called once the frame went out.
  std::vector<const MappedArena*> Unannounced() const;
  void MarkAnnounced(uint32_t arena_id);
  // A new stub knows nothing: every arena must be announced again.
  void MarkAllUnannounced();

  uint64_t allocated_bytes() const { return allocated_bytes_; }
  size_t arena_count() const { return arenas_.size(); }

 private:
  struct Slot {
    std::unique_ptr<MappedArena> arena;
    uint64_t keep_resident = 0;  // bytes from offset 0 never punched
    std::map<uint64_t, uint64_t> free_runs;  // offset -> size
    std::map<uint64_t, uint64_t> used;       // offset -> size
    bool announced = false;
  };

  bool TryAllocateIn(Slot* slot, uint64_t size, Allocation* out);
  void PunchHole(Slot* slot, uint64_t offset, uint64_t size);

  uint64_t default_size_;
  std::shared_ptr<ArenaRoom> room_;
  uint32_t next_id_ = 1;
  std::vector<Slot> arenas_;
  uint64_t allocated_bytes_ = 0;
};

class PeerArenas {
 public:
  // `usage`: what this stub's other arenas count against the same limits
  // (null: these alone).
  explicit PeerArenas(
      const StubLimits& limits = StubLimits(),
      std::shared_ptr<StubUsage> usage = nullptr)
      : limits_(limits), usage_(std::move(usage))
  {
  }
  ~PeerArenas() { Clear(); }
  PeerArenas(const PeerArenas&) = delete;
  PeerArenas& operator=(const PeerArenas&) = delete;
  // Maps the peer's arena `id` from `fd` (which this call always closes).
  // A duplicate id replaces the old mapping. `fd` must be a memfd on tmpfs
  // sealed against shrinking, at least `size` bytes long, and the arenas
  // with it must stay within the limits.
  Status Add(uint32_t id, int fd, uint64_t size);
  // Returns the address of [offset, offset + size) in arena `id`, or fails
  // when the arena is unknown or the range is outside it.
  Status Resolve(
      uint32_t id, uint64_t offset, uint64_t size, const uint8_t** out) const;
  void Clear()
  {
    arenas_.clear();
    mapped_bytes_ = 0;
    Recount();
  }
  size_t count() const { return arenas_.size(); }
  uint64_t mapped_bytes() const { return mapped_bytes_; }
  const StubLimits& limits() const { return limits_; }

 private:
  Status CheckLimits(uint32_t id, uint64_t size) const;
  // Brings usage_ up to date with what is mapped here.
  void Recount();

  const StubLimits limits_;
  const std::shared_ptr<StubUsage> usage_;
  uint64_t counted_arenas_ = 0;  // what usage_ holds of these
  uint64_t counted_bytes_ = 0;
  std::map<uint32_t, std::unique_ptr<MappedArena>> arenas_;
  uint64_t mapped_bytes_ = 0;  // sum of the arenas' sizes
};

}  // namespace tritonpy
