// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/fork_channels.h"

#include <utility>

#include "instance/stub_frames.h"
#include "ipc/fd_closer.h"
#include "protocol/protocol.h"
#include "triton/triton_util.h"
#include "util/barrier.h"

namespace tritonpy {

// One child's channel: its socket, its arenas, its calls, its thread.
class ForkChannels::Side {
 public:
  Side(const Settings& s, int fd, std::string describe)
      : describe_(std::move(describe)),
        channel_(
            std::make_shared<Channel>(
                fd, s.send_queue_bytes, Channel::Peer::kForkedChild)),
        peers_(s.limits, s.usage),
        bls_(
            std::make_unique<Bls>(
                s.server, describe_, s.arena_byte_size, s.model_control,
                s.limits, s.room, s.sandboxed, s.usage, s.stub_bls))
  {
  }

  void Start(std::atomic<size_t>* open)
  {
    open->fetch_add(1);
    thread_.Start(
        "tritonpy-forkbls", "a forked child's BLS reader",
        [this, open] {
          if (Step()) return true;
          End(open);
          return false;
        },
        [this, open](const Status& failed) {
          TRITONPY_LOG_ERROR(
              "tritonpy: closing the BLS channel of " + describe_ + ": " +
              failed.message());
          End(open);
          return false;
        });
  }

  bool done() const { return done_.load(); }
  bool peer_closed() const { return channel_->PeerClosed(); }

  // Ends the thread's Receive (it sees EOF); Join then returns.
  void Shutdown() { channel_->Shutdown(); }
  void Join() { thread_.Join(); }

 private:
  // One frame (or a timeout that flushed queued frames). False: the child
  // is gone or broke the protocol.
  bool Step()
  {
    size_t len = 0;
    std::vector<int> fds;
    Status err;
    const Channel::RecvResult r =
        channel_->Receive(&buf_, &len, &fds, -1, &err);
    if (r == Channel::RecvResult::kTimeout) return true;
    if (r == Channel::RecvResult::kFrame) {
      err = Guarded("handling a frame from a forked child", [&] {
        return Dispatch(buf_.data(), len, &fds);
      });
      tritonpy::CloseAll(&fds);
      if (err.ok()) return true;
    }
    tritonpy::CloseAll(&fds);
    if (!err.ok()) {
      TRITONPY_LOG_ERROR(
          "tritonpy: closing the BLS channel of " + describe_ + ": " +
          err.message());
      SendError(channel_.get(), err.message());
    }
    return false;
  }

  Status Dispatch(const uint8_t* msg, size_t len, std::vector<int>* fds)
  {
    proto::FrameView f;
    TRITONPY_RETURN_IF_ERROR(proto::DecodeHeader(msg, len, &f));
    if (f.type != proto::FrameType::kArena && !fds->empty()) {
      return Violation(
          std::string("a ") + proto::FrameTypeName(f.type) +
          " frame carried file descriptors");
    }
    const uint8_t* body = nullptr;
    TRITONPY_RETURN_IF_ERROR(ResolvePeerBody(f, peers_, &body));
    std::vector<proto::ArenaRef> release;
    if (f.body_in_arena) release.push_back(f.body_ref);
    switch (f.type) {
      case proto::FrameType::kArena:
        return AddPeerArena(f, body, fds, &peers_);
      case proto::FrameType::kBlsRequest:
      case proto::FrameType::kBlsCancel:
      case proto::FrameType::kBlsRelease:
      case proto::FrameType::kModelControl:
        // A child's calls are not traced: the requests given to the
        // stub's execute() are not the child's to name.
        TRITONPY_RETURN_IF_ERROR(bls_->OnFrame(
            f, body, peers_, channel_, &release,
            [](uint64_t, uint32_t) { return nullptr; }));
        break;
      default:
        return Violation(
            std::string("unexpected ") + proto::FrameTypeName(f.type) +
            " frame from a forked child (it may send only ARENA and the BLS "
            "frames)");
    }
    if (!release.empty()) SendRelease(channel_.get(), release);
    return Status();
  }

  // Thread: the child is gone. Its calls are cancelled and what it held
  // freed (~Bls waits, bounded, for Triton to give the calls back).
  void End(std::atomic<size_t>* open)
  {
    channel_->Shutdown();
    bls_.reset();
    peers_.Clear();
    open->fetch_sub(1);
    done_.store(true);
  }

  const std::string describe_;
  std::shared_ptr<Channel> channel_;
  PeerArenas peers_;  // the child's arenas (its large inputs)
  std::unique_ptr<Bls> bls_;
  std::vector<uint8_t> buf_;
  std::atomic<bool> done_{false};
  WorkerThread thread_;  // last: joined before the rest is destroyed
};

ForkChannels::ForkChannels(Settings settings) : settings_(std::move(settings))
{
}

ForkChannels::~ForkChannels()
{
  CloseAll();
}

void
ForkChannels::Reap(bool all_closed)
{
  for (auto it = sides_.begin(); it != sides_.end();) {
    if ((*it)->done() || (all_closed && (*it)->peer_closed())) {
      (*it)->Join();
      it = sides_.erase(it);
    } else {
      ++it;
    }
  }
}

void
ForkChannels::Open(int fd)
{
  Reap(false);
  if (sides_.size() >= kMaxChannels) Reap(true);
  if (sides_.size() >= kMaxChannels) {
    CloseReceived(fd);  // (its queue may hold descriptors: the closer's)
    ++refused_;
    if ((refused_ & (refused_ - 1)) == 0) {  // a power of two: not a flood
      TRITONPY_LOG_WARN(
          "tritonpy: " + settings_.describe +
          ": a forked child's BLS channel was refused: " +
          std::to_string(kMaxChannels) +
          " are open already (its BLS calls fail); refused so far: " +
          std::to_string(refused_));
    }
    return;
  }
  const std::string describe = settings_.describe +
                               " (forked child, BLS channel " +
                               std::to_string(++opened_) + ")";
  sides_.push_back(std::make_unique<Side>(settings_, fd, describe));
  sides_.back()->Start(&open_);
}

void
ForkChannels::ShutdownAll()
{
  for (auto& side : sides_) side->Shutdown();
}

void
ForkChannels::CloseAll()
{
  for (auto& side : sides_) side->Shutdown();
  for (auto& side : sides_) side->Join();
  sides_.clear();
}

}  // namespace tritonpy
