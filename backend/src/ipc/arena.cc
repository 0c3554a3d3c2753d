// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "ipc/arena.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ipc/fd_closer.h"

namespace tritonpy {

namespace {

std::string
Errno(const char* what)
{
  return std::string(what) + ": " + strerror(errno);
}

uint64_t
RoundUp(uint64_t v, uint64_t to)
{
  return (v + to - 1) / to * to;
}

}  // namespace

Status
MappedArena::Create(
    uint32_t id, uint64_t size, std::unique_ptr<MappedArena>* out)
{
  int fd = memfd_create("tritonpy-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::Internal(Errno("tritonpy: memfd_create"));
  // memfds are created 0777 & ~umask; the protocol wants 0600.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status s = Status::Internal(Errno("tritonpy: sizing arena memfd"));
    close(fd);
    return s;
  }
  // The peer maps this memfd: it must never shrink under its mapping (the
  // stub refuses an arena without F_SEAL_SHRINK). It never grows either,
  // and no one may change the seals after this.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Status s = Status::Internal(Errno("tritonpy: sealing arena memfd"));
    close(fd);
    return s;
  }
  return Map(id, fd, size, /*writable=*/true, /*keep_fd=*/true, out);
}

Status
MappedArena::Map(
    uint32_t id, int fd, uint64_t size, bool writable, bool keep_fd,
    std::unique_ptr<MappedArena>* out)
{
  if (size == 0) {
    close(fd);
    return Status::InvalidArg("tritonpy: arena of size 0");
  }
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* base = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = Status::Internal(Errno("tritonpy: mmap arena"));
    close(fd);
    return s;
  }
  if (!keep_fd) {
    close(fd);
    fd = -1;
  }
  out->reset(new MappedArena(id, fd, static_cast<uint8_t*>(base), size));
  return Status();
}

MappedArena::~MappedArena()
{
  munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

uint64_t
ArenaRoom::Take(uint64_t least, uint64_t most)
{
  uint64_t used = used_.load();
  while (true) {
    const uint64_t left = used < limit_ ? limit_ - used : 0;
    const uint64_t take = most < left ? most : left;
    if (take < least) return 0;
    if (used_.compare_exchange_weak(used, used + take)) return take;
  }
}

ArenaAllocator::ArenaAllocator(
    uint64_t default_arena_size, std::shared_ptr<ArenaRoom> room)
    : default_size_(RoundUp(
          default_arena_size < kArenaAlignment ? kArenaAlignment
                                               : default_arena_size,
          4096)),
      room_(std::move(room))
{
}

ArenaAllocator::~ArenaAllocator()
{
  if (room_ == nullptr) return;
  for (const Slot& slot : arenas_) room_->Give(slot.arena->size());
}

bool
ArenaAllocator::TryAllocateIn(Slot* slot, uint64_t size, Allocation* out)
{
  for (auto it = slot->free_runs.begin(); it != slot->free_runs.end(); ++it) {
    if (it->second < size) continue;
    uint64_t offset = it->first;
    uint64_t run = it->second;
    slot->free_runs.erase(it);
    if (run > size) slot->free_runs[offset + size] = run - size;
    slot->used[offset] = size;
    out->arena_id = slot->arena->id();
    out->offset = offset;
    out->size = size;
    out->ptr = slot->arena->base() + offset;
    allocated_bytes_ += size;
    return true;
  }
  return false;
}

Status
ArenaAllocator::Allocate(uint64_t size, Allocation* out)
{
  if (size > (UINT64_C(1) << 48)) {
    return Status::InvalidArg(
        "tritonpy: arena allocation of " + std::to_string(size) +
        " bytes is too large");
  }
  uint64_t need = RoundUp(size == 0 ? 1 : size, kArenaAlignment);
  for (Slot& slot : arenas_) {
    if (TryAllocateIn(&slot, need, out)) return Status();
  }
  uint64_t arena_size = need * 2 > default_size_ ? need * 2 : default_size_;
  arena_size = RoundUp(arena_size, 4096);
  if (room_ != nullptr) {
    // No larger than the stub can map, down to just the pages needed.
    const uint64_t least = RoundUp(need, 4096);
    if (least > room_->limit()) {
      return Status::InvalidArg(
          std::to_string(size) + " bytes are more than the stub can map: " +
          "the backend's arenas shared with it may take " +
          std::to_string(room_->limit()) + " bytes (" + room_->why() + ")");
    }
    arena_size = room_->Take(least, arena_size);
    if (arena_size == 0) {
      return Status::Unavailable(
          std::to_string(size) + " bytes do not fit: the backend's arenas " +
          "shared with the stub hold " + std::to_string(room_->used()) +
          " bytes of the " + std::to_string(room_->limit()) + " it can map (" +
          room_->why() + "), and none has that much free");
    }
  }
  std::unique_ptr<MappedArena> arena;
  Status made = MappedArena::Create(next_id_, arena_size, &arena);
  if (!made.ok()) {
    if (room_ != nullptr) room_->Give(arena_size);
    return made;
  }
  ++next_id_;
  uint64_t earlier = 0;
  for (const Slot& s : arenas_) earlier += s.arena->size();
  Slot slot;
  slot.arena = std::move(arena);
  slot.keep_resident =
      earlier >= kKeepResidentBytes ? 0 : kKeepResidentBytes - earlier;
  slot.free_runs[0] = arena_size;
  arenas_.push_back(std::move(slot));
  if (!TryAllocateIn(&arenas_.back(), need, out)) {
    return Status::Internal("tritonpy: fresh arena cannot hold allocation");
  }
  return Status();
}

void
ArenaAllocator::PunchHole(Slot* slot, uint64_t offset, uint64_t size)
{
  // Only whole pages inside the run, past the resident part, are punched.
  uint64_t start = RoundUp(
      offset > slot->keep_resident ? offset : slot->keep_resident, 4096);
  uint64_t end = (offset + size) / 4096 * 4096;
  if (end <= start || end - start < kPunchHoleMinBytes) return;
  // Best effort: on failure the pages simply stay resident.
  (void)fallocate(
      slot->arena->fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
      static_cast<off_t>(start), static_cast<off_t>(end - start));
}

void
ArenaAllocator::Free(uint32_t arena_id, uint64_t offset)
{
  for (Slot& slot : arenas_) {
    if (slot.arena->id() != arena_id) continue;
    auto it = slot.used.find(offset);
    if (it == slot.used.end()) return;
    uint64_t size = it->second;
    slot.used.erase(it);
    allocated_bytes_ -= size;
    // Coalesce with the neighbouring free runs.
    auto next = slot.free_runs.lower_bound(offset);
    if (next != slot.free_runs.end() && next->first == offset + size) {
      size += next->second;
      next = slot.free_runs.erase(next);
    }
    if (next != slot.free_runs.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        slot.free_runs.erase(prev);
      }
    }
    slot.free_runs[offset] = size;
    if (size >= kPunchHoleMinBytes) PunchHole(&slot, offset, size);
    return;
  }
}

std::vector<const MappedArena*>
ArenaAllocator::Unannounced() const
{
  std::vector<const MappedArena*> out;
  for (const Slot& slot : arenas_) {
    if (!slot.announced) out.push_back(slot.arena.get());
  }
  return out;
}

void
ArenaAllocator::MarkAnnounced(uint32_t arena_id)
{
  for (Slot& slot : arenas_) {
    if (slot.arena->id() == arena_id) slot.announced = true;
  }
}

void
ArenaAllocator::MarkAllUnannounced()
{
  for (Slot& slot : arenas_) slot.announced = false;
}

Status
PeerArenas::Add(uint32_t id, int fd, uint64_t size)
{
  const std::string which = "stub arena " + std::to_string(id);
  // Only an anonymous tmpfs memfd: a file or a hugetlbfs memfd could lose
  // pages under the mapping (SIGBUS inside tritonserver).
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
    CloseReceived(fd);  // a socket's close may block: the closer's
    return Violation(which + " is not a memfd on tmpfs");
  }
  // The seals first: once F_SEAL_SHRINK is on (it cannot be taken off) the
  // size read next can only grow, so a memfd long enough now stays so.
  // Read the other way round, the stub could shrink it in between and
  // reads past its new end would be a SIGBUS inside tritonserver.
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    close(fd);
    return Violation(
        which + " is not sealed against shrinking (F_SEAL_SHRINK)");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      static_cast<uint64_t>(st.st_size) < size) {
    close(fd);
    return Violation(
        which + " is smaller than its announced " + std::to_string(size) +
        " bytes");
  }
  if (size == 0) {
    close(fd);
    return Violation(which + " is announced with 0 bytes");
  }
  Status within = CheckLimits(id, size);
  if (!within.ok()) {
    close(fd);
    return within;
  }
  std::unique_ptr<MappedArena> arena;
  TRITONPY_RETURN_IF_ERROR(
      MappedArena::Map(
          id, fd, size, /*writable=*/false, /*keep_fd=*/false, &arena));
  auto it = arenas_.find(id);
  if (it != arenas_.end()) mapped_bytes_ -= it->second->size();
  mapped_bytes_ += size;
  arenas_[id] = std::move(arena);
  Recount();
  return Status();
}

void
PeerArenas::Recount()
{
  if (usage_ == nullptr) return;
  // Differences wrap as unsigned numbers do: adding one is subtracting.
  usage_->arenas.fetch_add(arenas_.size() - counted_arenas_);
  usage_->arena_bytes.fetch_add(mapped_bytes_ - counted_bytes_);
  counted_arenas_ = arenas_.size();
  counted_bytes_ = mapped_bytes_;
}

Status
PeerArenas::CheckLimits(uint32_t id, uint64_t size) const
{
  // A duplicate id replaces its arena: it adds no mapping, and its old
  // size no longer counts.
  auto it = arenas_.find(id);
  const bool replaces = it != arenas_.end();
  // With a usage shared with this stub's other arenas, all of them count.
  const uint64_t others =
      usage_ == nullptr ? 0 : usage_->arenas.load() - counted_arenas_;
  const uint64_t other_bytes =
      usage_ == nullptr ? 0 : usage_->arena_bytes.load() - counted_bytes_;
  const uint64_t count = others + arenas_.size() + (replaces ? 0 : 1);
  if (count > limits_.max_arenas) {
    return Violation(
        "stub arena " + std::to_string(id) + " would be arena number " +
        std::to_string(count) + " of the stub, past stub-max-arenas=" +
        std::to_string(limits_.max_arenas));
  }
  // What is mapped never passes max_arena_bytes (but for the race
  // StubUsage allows), so nothing wraps unless that race did.
  const uint64_t kept =
      other_bytes + mapped_bytes_ - (replaces ? it->second->size() : 0);
  if (kept > limits_.max_arena_bytes || size > limits_.max_arena_bytes - kept) {
    return Violation(
        "stub arena " + std::to_string(id) + " of " + std::to_string(size) +
        " bytes would make " + std::to_string(kept) + " + " +
        std::to_string(size) +
        " bytes of stub arenas, past stub-max-arena-bytes=" +
        std::to_string(limits_.max_arena_bytes));
  }
  return Status();
}

Status
PeerArenas::Resolve(
    uint32_t id, uint64_t offset, uint64_t size, const uint8_t** out) const
{
  auto it = arenas_.find(id);
  if (it == arenas_.end()) {
    return Status::InvalidArg(
        "tritonpy protocol violation: unknown stub arena " +
        std::to_string(id));
  }
  uint64_t arena_size = it->second->size();
  // Written so that nothing can overflow: offset <= arena_size first.
  if (offset > arena_size || size > arena_size - offset) {
    return Status::InvalidArg(
        "tritonpy protocol violation: range [" + std::to_string(offset) +
        ", +" + std::to_string(size) + ") is outside stub arena " +
        std::to_string(id) + " of " + std::to_string(arena_size) + " bytes");
  }
  *out = it->second->base() + offset;
  return Status();
}

}  // namespace tritonpy
