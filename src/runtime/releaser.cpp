#include "runtime/releaser.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

namespace acrobat {

Releaser::Releaser() {
  const char* poison = std::getenv("ACROBAT_POISON_RELEASED");
  poison_ = poison && std::string(poison) == "1";
}

void Releaser::reset(bool enabled, bool by_node) {
  enabled_ = enabled;
  by_node_ = enabled && by_node;
  refs_.clear();
  live_rows_.clear();
  held_begin_.clear();
  held_.clear();
}

uint32_t Releaser::add_node(const std::vector<uint8_t>& owned, const aot::Val* args, size_t num_args,
                            const NodeStore& nodes) {
  // The node reads its lazy arguments until its batch has run; the host program owns what the
  // ownership analysis says it does.
  for (size_t a = 0; a < num_args; ++a) {
    if (args[a].node < 0) continue;
    int32_t& count = refs_[nodes[args[a].node].ref_begin + args[a].lazy.slot];
    ACROBAT_ASSERT(count > 0, "a static block reads a tensor nothing owns");
    ++count;
  }
  const auto ref_begin = static_cast<uint32_t>(refs_.size());
  refs_.insert(refs_.end(), owned.begin(), owned.end());
  return ref_begin;
}

void Releaser::batch_ran(const analysis::StaticBlock& s, const std::vector<int>& ids, int batch,
                         const NodeStore& nodes, BatchOutputs& outputs) {
  // Outputs nothing owns any more go back at once (read by no later node and no host value), then
  // the batch's own references to its inputs.
  std::vector<int32_t>& live = live_rows_.emplace_back(s.ops.size(), 0);
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (outputs.store_of(batch, static_cast<int>(k), 0) >= 0) {  // growing storage: row by row
      for (int id : ids)
        if (refs_[nodes[id].ref_begin + k] == 0) row_released(batch, static_cast<int>(k), nodes[id].row, outputs);
      continue;
    }
    if (!outputs.output(batch, static_cast<int>(k))) continue;
    for (int id : ids) live[k] += refs_[nodes[id].ref_begin + k] > 0 ? 1 : 0;
    if (live[k] == 0) release_output(batch, static_cast<int>(k), outputs);
  }
  for (int id : ids) {
    const aot::Val* a = nodes.args(nodes[id]);
    for (size_t e = 0; e < s.args.size(); ++e)
      if (a[e].node >= 0) unref(nodes[nodes.first(a[e].node)], a[e].lazy.slot, outputs);
  }
}

int64_t Releaser::drop_unowned(std::span<const int32_t> ids, NodeStore& nodes, BatchOutputs& outputs) {
  if (!by_node_) return 0;
  std::vector<int32_t> unowned;  // pending nodes that lost the last owner of an output
  auto give_up = [&](int32_t first, uint32_t slot, int32_t n) {
    const NodeStore::Node& f = nodes[first];
    int32_t& count = refs_[f.ref_begin + slot];
    ACROBAT_ASSERT(count >= n, "more references given up than a tensor has");
    count -= n;
    if (count > 0) return;
    if (f.batch >= 0)
      row_released(f.batch, static_cast<int>(slot), f.row, outputs);
    else if (f.batch == NodeStore::kPending)
      unowned.push_back(first);
  };
  // What the handles hold, summed by the node that computes each output (a shared node's on the
  // first's), then given up.
  std::vector<std::pair<uint64_t, int32_t>> holds;  // (first << 32 | slot, references)
  for (int32_t id : ids) {
    const size_t ops = nodes.plan().blocks[nodes[id].block].ops.size();
    for (size_t k = 0; k < ops; ++k) {
      int32_t& h = held_[held_begin_[static_cast<size_t>(id)] + k];
      if (h != 0) holds.emplace_back(uint64_t(uint32_t(nodes.first(id))) << 32 | k, h);
      h = 0;
    }
  }
  std::sort(holds.begin(), holds.end());
  for (size_t a = 0; a < holds.size();) {
    int32_t n = 0;
    size_t b = a;
    for (; b < holds.size() && holds[b].first == holds[a].first; ++b) n += holds[b].second;
    if (n > 0) give_up(static_cast<int32_t>(holds[a].first >> 32), static_cast<uint32_t>(holds[a].first), n);
    a = b;
  }
  int64_t dropped = 0;
  while (!unowned.empty()) {
    const int32_t m = unowned.back();
    unowned.pop_back();
    NodeStore::Node& n = nodes[m];
    if (n.batch != NodeStore::kPending) continue;  // dropped already
    const analysis::StaticBlock& s = nodes.plan().blocks[n.block];
    bool owned = false;
    for (size_t k = 0; k < s.ops.size() && !owned; ++k) owned = refs_[n.ref_begin + k] > 0;
    if (owned) continue;
    n.batch = NodeStore::kDropped;
    ++dropped;
    const aot::Val* a = nodes.args(n);
    for (size_t e = 0; e < s.args.size(); ++e)
      if (a[e].node >= 0) give_up(nodes.first(a[e].node), static_cast<uint32_t>(a[e].lazy.slot), 1);
  }
  return dropped;
}

void Releaser::row_released(int batch, int slot, int row, BatchOutputs& outputs) {
  if (outputs.store_of(batch, slot, row) >= 0) {
    if (auto [p, n] = outputs.release_grown_row(batch, slot, row); p) give_back(p, n, outputs);
    return;
  }
  if (--live_rows_[batch][slot] == 0) release_output(batch, slot, outputs);
}

void Releaser::release_output(int batch, int slot, BatchOutputs& outputs) {
  float*& p = outputs.output(batch, slot);
  give_back(p, outputs.output_floats(batch, slot), outputs);
  p = nullptr;
}

void Releaser::give_back(float* p, size_t n, BatchOutputs& outputs) {
  if (poison_) {
    std::fill(p, p + n, std::numeric_limits<float>::quiet_NaN());
    poisoned_.emplace_back(p, n);
  } else {
    outputs.buffers().release(p, n);
  }
}

void Releaser::release_all(BatchOutputs& outputs) {
  for (size_t b = 0; b < outputs.size(); ++b) {
    const std::vector<float*>& held = outputs.outputs(static_cast<int>(b));
    for (size_t k = 0; k < held.size(); ++k)
      if (float* p = held[k]) {
        outputs.buffers().release(p, outputs.output_floats(static_cast<int>(b), static_cast<int>(k)));
        outputs.output(static_cast<int>(b), static_cast<int>(k)) = nullptr;
      }
  }
  for (auto [p, n] : outputs.release_stores()) outputs.buffers().release(p, n);
  for (auto [p, n] : poisoned_) outputs.buffers().release(p, n);
  poisoned_.clear();
}

}  // namespace acrobat
