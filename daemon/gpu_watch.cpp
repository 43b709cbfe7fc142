#include "daemon/gpu_watch.h"

namespace ckprof {

GpuWatch::GpuWatch(asio::any_io_executor io, std::unique_ptr<GpuProbe> probe,
                   std::chrono::milliseconds poll, std::function<void(GpuSnapshot)> on_snapshot)
    : io_(std::move(io)),
      probe_(std::move(probe)),
      poll_(poll),
      on_snapshot_(std::move(on_snapshot)),
      thread_([this] { Loop(); }) {}

GpuWatch::~GpuWatch() {
  *alive_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GpuWatch::SetActive(bool active) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ == active) return;
    active_ = active;
  }
  cv_.notify_all();
}

void GpuWatch::PollNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poll_now_ = true;
  }
  cv_.notify_all();
}

void GpuWatch::Loop() {
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (stop_) return;
        if (poll_now_ || (active_ && std::chrono::steady_clock::now() >= next)) break;
        if (active_) {
          cv_.wait_until(lock, next);
        } else {
          cv_.wait(lock);
        }
      }
      poll_now_ = false;
    }
    GpuSnapshot snap;
    if (auto procs = probe_->Processes(); procs) {
      snap.processes = std::move(*procs);
    } else {
      snap.error = procs.error();
    }
    snap.readings = probe_->Readings();
    snap.taken = std::chrono::steady_clock::now();
    next = snap.taken + poll_;
    // Delivered on the io thread; dropped when the watch is gone by then. (alive_ is read
    // there only.)
    asio::post(io_, [this, alive = alive_, snap = std::move(snap)]() mutable {
      if (*alive) on_snapshot_(std::move(snap));
    });
  }
}

}  // namespace ckprof
