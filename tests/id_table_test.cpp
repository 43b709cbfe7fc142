// IdTable (daemon/id_table.h), the scheduler's table of queued and running tasks: what an
// unordered_map gave it (find, at, count, emplace, erase, iteration, stable references), and
// growth by pages rather than rehashing every entry, pages freed with their last entry.
#include "daemon/id_table.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace ckprof {
namespace {

constexpr int64_t kPage = IdTable<int>::kPageSlots;

TEST(IdTable, HoldsWhatAnUnorderedMapWouldForConsecutiveAndScatteredIds) {
  IdTable<std::string> table;
  std::map<int64_t, std::string> want;
  std::vector<int64_t> ids;
  for (int64_t id = 1; id <= 10000; ++id) ids.push_back(id);  // a submit's: consecutive
  for (int64_t id : std::vector<int64_t>{-5, -kPage, 0, kPage - 1, kPage, int64_t{1} << 40,
                                         (int64_t{1} << 40) + 1}) {
    ids.push_back(id);  // page edges, below zero, far apart
  }
  for (int64_t id : ids) {
    auto [it, added] = table.emplace(id, "v" + std::to_string(id));
    EXPECT_EQ(added, !want.count(id)) << id;
    EXPECT_EQ(it->first, id);
    want.emplace(id, "v" + std::to_string(id));
  }
  EXPECT_EQ(table.size(), want.size());
  auto [again, added] = table.emplace(7, "other");
  EXPECT_FALSE(added);
  EXPECT_EQ(again->second, "v7");  // the first value kept
  for (const auto& [id, v] : want) {
    ASSERT_EQ(table.count(id), 1u) << id;
    EXPECT_EQ(table.at(id), v);
    EXPECT_EQ(table.find(id)->second, v);
  }
  for (int64_t id : {int64_t{10001}, int64_t{-1}, int64_t{4097} * 3, int64_t{1} << 41}) {
    EXPECT_EQ(table.count(id), 0u) << id;
    EXPECT_TRUE(table.find(id) == table.end()) << id;
    EXPECT_THROW((void)table.at(id), std::out_of_range) << id;
  }
  // Iteration visits each entry once, and through a const table too.
  std::map<int64_t, std::string> seen;
  for (auto& [id, v] : table) EXPECT_TRUE(seen.emplace(id, v).second) << id;
  EXPECT_EQ(seen, want);
  const IdTable<std::string>& read = table;
  size_t n = 0;
  for (auto it = read.begin(); it != read.end(); ++it) ++n;
  EXPECT_EQ(n, want.size());
  EXPECT_EQ(read.at(kPage), "v" + std::to_string(kPage));
}

TEST(IdTable, ErasingByIdOrIteratorFreesAPageWithItsLastEntry) {
  IdTable<int> table;
  for (int64_t id = 0; id < 3 * kPage; ++id) table.emplace(id, static_cast<int>(id));
  EXPECT_EQ(table.pages(), 3u);
  EXPECT_EQ(table.erase(int64_t{5}), 1u);
  EXPECT_EQ(table.erase(int64_t{5}), 0u);  // not held any more
  EXPECT_EQ(table.count(5), 0u);
  for (int64_t id = kPage; id < 2 * kPage; ++id) table.erase(table.find(id));
  EXPECT_EQ(table.pages(), 2u);  // the middle page, emptied, is gone
  EXPECT_EQ(table.size(), 2u * kPage - 1);
  std::set<int64_t> left;
  for (const auto& [id, v] : table) {
    EXPECT_EQ(v, id);
    left.insert(id);
  }
  EXPECT_EQ(left.size(), table.size());
  EXPECT_EQ(left.count(5), 0u);
  EXPECT_EQ(left.count(kPage), 0u);
  for (int64_t id : std::vector<int64_t>(left.begin(), left.end())) table.erase(id);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.pages(), 0u);
  EXPECT_TRUE(table.begin() == table.end());
}

TEST(IdTable, ReferencesStayValidWhileItGrowsByAMillionEntries) {
  IdTable<std::vector<int>> table;
  std::vector<int>& first = table.emplace(1, std::vector<int>{1, 2, 3}).first->second;
  const std::vector<int>* where = &first;
  for (int64_t id = 2; id <= 1'000'000; ++id) table.emplace(id);
  EXPECT_EQ(&table.at(1), where);  // not moved: growth adds pages
  EXPECT_EQ(first, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(table.size(), 1'000'000u);
  EXPECT_EQ(table.pages(), 1'000'000u / kPage + 1);
}

}  // namespace
}  // namespace ckprof
