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

void Releaser::reset(bool enabled) {
  enabled_ = enabled;
  refs_.clear();
  live_rows_.clear();
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
