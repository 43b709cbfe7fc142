// bench_task_table: the scheduler's task table grown to N tasks one insert at a time, as a
// large submit's steps grow it on the io thread: an unordered_map (libstdc++'s own growth, and
// reserved twofold as the scheduler once did) against IdTable (daemon/id_table.h), side by side.
// Prints the total time and the longest single insert: a rehash moves every task held, and
// everything on the io thread (every user's request, every GPU's next start) waits for it.
//   bench_task_table [N]   (default 2000000)
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "daemon/id_table.h"

namespace {

struct Entry {  // about the size of a scheduler Task
  std::array<char, 240> bytes{};
};

struct Figures {
  double total_ms = 0;
  double worst_ms = 0;
  int64_t worst_at = 0;
};

template <typename Table, typename Before>
Figures Grow(Table& table, int64_t n, Before before) {
  using Clock = std::chrono::steady_clock;
  Figures f;
  for (int64_t id = 1; id <= n; ++id) {
    const auto start = Clock::now();
    before(table);
    table.emplace(id, Entry{});
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    f.total_ms += ms;
    if (ms > f.worst_ms) f.worst_ms = ms, f.worst_at = id;
  }
  return f;
}

void Print(const char* name, const Figures& f) {
  std::printf("%-44s %10.0f %18.2f %14lld\n", name, f.total_ms, f.worst_ms,
              static_cast<long long>(f.worst_at));
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 2'000'000;
  std::printf("# the task table grown to %lld tasks of %zu bytes, one insert at a time\n",
              static_cast<long long>(n), sizeof(Entry));
  std::printf("%-44s %10s %18s %14s\n", "table", "total ms", "longest insert ms", "at task");
  for (int round = 0; round < 2; ++round) {  // the first round also pays for fresh memory
    {
      std::unordered_map<int64_t, Entry> table;
      Print("unordered_map, its own growth", Grow(table, n, [](auto&) {}));
    }
    {
      std::unordered_map<int64_t, Entry> table;
      Print("unordered_map, reserved twofold", Grow(table, n, [](auto& t) {
              if (static_cast<double>(t.size() + 1) >
                  static_cast<double>(t.bucket_count()) * t.max_load_factor()) {
                t.reserve(2 * t.size() + 1);
              }
            }));
    }
    {
      ckprof::IdTable<Entry> table;
      Print("IdTable (pages of 256 ids)", Grow(table, n, [](auto&) {}));
    }
  }
}
