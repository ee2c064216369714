#include "runtime/batch_outputs.h"

#include <algorithm>

namespace acrobat {

void BatchOutputs::clear() {
  outputs_.clear();
  sizes_.clear();
  blocks_.clear();
  offsets_.clear();
  stores_.clear();
  grown_.clear();
}

int BatchOutputs::add(int block, int64_t B) {
  const int batch = static_cast<int>(outputs_.size());
  outputs_.emplace_back(plan_.blocks[block].ops.size(), nullptr);
  sizes_.push_back(B);
  blocks_.push_back(block);
  offsets_.emplace_back();
  grown_.emplace_back();
  return batch;
}

size_t BatchOutputs::output_floats(int batch, int slot) const {
  const std::vector<int64_t>& offsets = offsets_[batch];
  const int64_t B = sizes_[batch];
  if (!offsets.empty()) return static_cast<size_t>(std::max<int64_t>(1, offsets[slot * (B + 1) + B]));
  return static_cast<size_t>(B * plan_.blocks[blocks_[batch]].ops[slot].size);
}

void BatchOutputs::grow(int batch, int slot) {
  std::vector<std::vector<int32_t>>& g = grown_[batch];
  if (g.empty()) g.resize(plan_.blocks[blocks_[batch]].ops.size());
  g[slot].assign(static_cast<size_t>(sizes_[batch]), -1);
}

bool BatchOutputs::place_appended(int batch, int slot, int row, const NodeStore& nodes, const aot::Val& old,
                                  int64_t old_elems, int64_t new_elems, float** data) {
  int32_t& placed = grown_[batch][slot][row];
  if (old.node >= 0) {
    const NodeStore::Node& n = nodes[nodes.first(old.node)];
    const int32_t id = store_of(n.batch, old.lazy.slot, n.row);
    if (id >= 0) {
      Store& st = stores_[id];
      if (st.used == old_elems && static_cast<size_t>(new_elems) <= st.capacity) {
        st.used = new_elems;
        ++st.rows;
        placed = id;
        *data = st.data;
        return true;
      }
    }
  }
  // A new store with room for as many appends again: O(1) copies per appended row, amortised.
  Store st;
  st.capacity = BufferPool::size_class(static_cast<size_t>(2 * std::max<int64_t>(new_elems, 1)));
  st.data = buffers_.alloc(st.capacity);
  st.used = new_elems;
  st.rows = 1;
  placed = static_cast<int32_t>(stores_.size());
  stores_.push_back(st);
  *data = st.data;
  return false;
}

std::pair<float*, size_t> BatchOutputs::release_grown_row(int batch, int slot, int row) {
  Store& st = stores_[grown_[batch][slot][row]];
  ACROBAT_ASSERT(st.rows > 0 && st.data, "a row of a released store released again");
  if (--st.rows > 0) return {nullptr, 0};
  std::pair<float*, size_t> out{st.data, st.capacity};
  st.data = nullptr;
  return out;
}

std::vector<std::pair<float*, size_t>> BatchOutputs::release_stores() {
  std::vector<std::pair<float*, size_t>> out;
  for (Store& st : stores_)
    if (st.data) {
      out.emplace_back(st.data, st.capacity);
      st.data = nullptr;
      st.rows = 0;
    }
  return out;
}

}  // namespace acrobat
