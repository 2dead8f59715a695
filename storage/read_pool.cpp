#include "storage/read_pool.h"

namespace psched {

ReadPool::ReadPool(unsigned threads) {
  for (unsigned t = 0; t < threads; ++t) threads_.emplace_back([this, t] { loop(t + 1); });
}

ReadPool::~ReadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReadPool::run(unsigned pieces, const std::function<void(unsigned)>& piece) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    piece_ = &piece;
    pieces_ = pieces;
    pieces_left_ = pieces - 1;
    ++generation_;
  }
  wake_.notify_all();
  piece(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pieces_left_ == 0; });
}

void ReadPool::loop(unsigned k) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned)>* piece = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (k >= pieces_) continue;
      piece = piece_;
    }
    (*piece)(k);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pieces_left_ == 0) done_.notify_one();
  }
}

}  // namespace psched
