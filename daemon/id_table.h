#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ckprof {

// A map from int64 ids to V, for ids handed out mostly consecutive (a submit's tasks): the ids
// are grouped in pages of 256 slots, a page found through a small hash map of pages, each entry
// allocated on its own. Growing never moves what it holds: an unordered_map of a million tasks
// rehashes every one of them when it doubles (35-40 ms from one to two million, every other user
// waiting), this one adds a page. A page is freed with its last entry. Pages are small (2 KiB of
// slots) since one held entry keeps its page: a job's ids are consecutive, so its tasks hold at
// most 2 + n/256 pages, and a user spreading one-task jobs apart pins 2 KiB a job, not more.
//
// The subset of unordered_map's interface the scheduler uses, with its guarantees: a reference
// to an entry stays valid until that entry is erased; an iterator, until something is inserted
// or erased. The order of iteration is unspecified.
template <typename V>
class IdTable {
  static constexpr int kPageBits = 8;

 public:
  static constexpr int64_t kPageSlots = int64_t{1} << kPageBits;
  using key_type = int64_t;
  using mapped_type = V;
  using value_type = std::pair<const int64_t, V>;

 private:
  struct Page {
    std::array<std::unique_ptr<value_type>, kPageSlots> slots;
    size_t live = 0;
  };
  using Pages = std::unordered_map<int64_t, std::unique_ptr<Page>>;

  template <typename P, typename E>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = E;
    using difference_type = std::ptrdiff_t;
    using pointer = E*;
    using reference = E&;

    Iter() = default;
    Iter(P page, P end, int64_t slot) : page_(page), end_(end), slot_(slot) { Settle(); }
    // An iterator converts to a const_iterator.
    template <typename Q, typename F>
    Iter(const Iter<Q, F>& o) : page_(o.page_), end_(o.end_), slot_(o.slot_) {}  // NOLINT

    E& operator*() const { return *page_->second->slots[slot_]; }
    E* operator->() const { return page_->second->slots[slot_].get(); }
    Iter& operator++() {
      ++slot_;
      Settle();
      return *this;
    }
    Iter operator++(int) {
      Iter was = *this;
      ++*this;
      return was;
    }
    friend bool operator==(const Iter& a, const Iter& b) {
      return a.page_ == b.page_ && (a.page_ == a.end_ || a.slot_ == b.slot_);
    }

   private:
    template <typename, typename>
    friend class Iter;
    friend class IdTable;
    // Moves on to the next held entry, from this slot on (pages hold at least one).
    void Settle() {
      for (; page_ != end_; ++page_, slot_ = 0) {
        for (; slot_ < kPageSlots; ++slot_) {
          if (page_->second->slots[slot_]) return;
        }
      }
      slot_ = 0;
    }
    P page_{};
    P end_{};
    int64_t slot_ = 0;
  };

 public:
  using iterator = Iter<typename Pages::iterator, value_type>;
  using const_iterator = Iter<typename Pages::const_iterator, const value_type>;

  iterator begin() { return {pages_.begin(), pages_.end(), 0}; }
  iterator end() { return {pages_.end(), pages_.end(), 0}; }
  const_iterator begin() const { return {pages_.begin(), pages_.end(), 0}; }
  const_iterator end() const { return {pages_.end(), pages_.end(), 0}; }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Pages held (each 2 KiB of slots): for tests.
  size_t pages() const { return pages_.size(); }

  iterator find(int64_t id) {
    auto page = pages_.find(PageOf(id));
    if (page == pages_.end() || !page->second->slots[SlotOf(id)]) return end();
    return {page, pages_.end(), SlotOf(id)};
  }
  const_iterator find(int64_t id) const {
    auto page = pages_.find(PageOf(id));
    if (page == pages_.end() || !page->second->slots[SlotOf(id)]) return end();
    return {page, pages_.end(), SlotOf(id)};
  }
  size_t count(int64_t id) const { return find(id) == end() ? 0 : 1; }
  V& at(int64_t id) { return Held(find(id), id); }
  const V& at(int64_t id) const { return Held(find(id), id); }

  // Adds {id, V(args...)} unless id is held; returns the entry and whether it was added.
  template <typename... Args>
  std::pair<iterator, bool> emplace(int64_t id, Args&&... args) {
    auto [page, fresh] = pages_.try_emplace(PageOf(id));
    if (fresh) page->second = std::make_unique<Page>();
    std::unique_ptr<value_type>& slot = page->second->slots[SlotOf(id)];
    if (slot) return {iterator(page, pages_.end(), SlotOf(id)), false};
    try {
      slot = std::make_unique<value_type>(std::piecewise_construct, std::forward_as_tuple(id),
                                          std::forward_as_tuple(std::forward<Args>(args)...));
    } catch (...) {
      if (page->second->live == 0) pages_.erase(page);
      throw;
    }
    ++page->second->live;
    ++size_;
    return {iterator(page, pages_.end(), SlotOf(id)), true};
  }

  void erase(const_iterator it) {
    Page& page = *it.page_->second;
    page.slots[it.slot_].reset();
    --size_;
    if (--page.live == 0) pages_.erase(it.page_);
  }
  size_t erase(int64_t id) {
    auto it = find(id);
    if (it == end()) return 0;
    erase(const_iterator(it));
    return 1;
  }

 private:
  static int64_t PageOf(int64_t id) { return id >> kPageBits; }  // floor, also below zero
  static int64_t SlotOf(int64_t id) { return id & (kPageSlots - 1); }
  template <typename It>
  static auto& Held(It it, int64_t id) {
    if (it.page_ == it.end_) throw std::out_of_range("IdTable: no entry " + std::to_string(id));
    return it->second;
  }

  Pages pages_;
  size_t size_ = 0;
};

}  // namespace ckprof
