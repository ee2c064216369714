#include "runtime/node_store.h"

#include <string>

#include "runtime/schedule.h"
#include "support/sizes.h"

namespace acrobat {

void NodeStore::clear() {
  nodes_.clear();
  args_.clear();
  sizes_.clear();
  // Cleared at a size past which the table frees its slots; the next run records as many nodes.
  const size_t recorded = repeatable_.size();
  repeatable_.clear();
  repeatable_.reserve(recorded);
  num_nodes_ = 0;
}

NodeStore::Node NodeStore::place(int32_t block, const aot::Val* in_args) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const auto arg_begin = static_cast<uint32_t>(args_.size());
  args_.insert(args_.end(), in_args, in_args + s.args.size());
  aot::Val* args = &args_[arg_begin];
  Placement place;
  for (size_t a = 0; a < s.args.size(); ++a) {
    aot::Val& v = args[a];
    if (v.node < 0) continue;
    v.node = first(v.node);
    const Node& in = nodes_[v.node];
    if (in.batch < 0)
      place.add_input(in.phase, in.depth, v.phase_ends, v.lazy.ghost);
    else
      place.add_computed_input(in.phase, v.phase_ends, v.lazy.ghost);
  }
  return Node{block, place.phase, place.node_depth(), arg_begin};
}

// A record can repeat only a record that read the same outputs. One reading an output nothing has
// read yet (most of a tree model's: the parent of fresh children) repeats nothing, and is not
// hashed: it becomes the first reader of that output's node. A later record whose every lazy
// argument has been read is looked up by hash, and compared with its arguments' first readers: a
// record that was not hashed is the first reader of one of its arguments, so every repeat is found.
int32_t NodeStore::find_repeated(int32_t block, int phase, int depth, uint32_t arg_begin, int32_t id) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const size_t n = s.args.size();
  const aot::Val* args = &args_[arg_begin];
  bool unread = false;
  for (size_t a = 0; a < n; ++a)
    if (args[a].node >= 0 && nodes_[args[a].node].first_reader < 0) {
      nodes_[args[a].node].first_reader = id;
      unread = true;
    }
  if (unread) return -1;
  // A lazy argument is the same tensor when it is the same output of the same node; any other
  // when it is the same tensor (`data`).
  auto bits = [](const aot::Val& v) -> uint64_t {
    return v.node >= 0 ? (uint64_t(uint32_t(v.node)) << 32 | uint32_t(v.lazy.slot)) : uint64_t(v.i);
  };
  uint64_t h = (uint64_t(uint32_t(block)) << 40) ^ (uint64_t(uint32_t(phase)) << 20) ^ uint64_t(uint32_t(depth));
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 0x9E3779B97F4A7C15ull; h ^= h >> 29; };
  for (size_t a = 0; a < n; ++a) mix(bits(args[a]) ^ (args[a].node >= 0 ? 0x5555 : 0));
  auto [it, fresh] = repeatable_.try_emplace(h, id);
  if (!fresh) {
    if (same_record(it->second, block, phase, depth, args, n)) return it->second;
    it->second = id;  // a hash collision or a node that has run: this one from now on
  }
  for (size_t a = 0; a < n; ++a)
    if (args[a].node >= 0) {
      const int32_t c = nodes_[args[a].node].first_reader;
      if (same_record(c, block, phase, depth, args, n)) {
        it->second = c;
        return c;
      }
    }
  return -1;
}

bool NodeStore::same_record(int32_t c, int32_t block, int phase, int depth, const aot::Val* args, size_t n) const {
  const Node& r = nodes_[c];
  if (r.block != block || r.batch != kPending || r.phase != phase || r.depth != depth) return false;
  const aot::Val* x = &args_[r.arg_begin];
  for (size_t a = 0; a < n; ++a) {
    if (x[a].node != args[a].node) return false;
    if (args[a].node >= 0 ? x[a].lazy.slot != args[a].lazy.slot : x[a].i != args[a].i) return false;
  }
  return true;
}

void NodeStore::check_sizes(const analysis::StaticBlock& s, const aot::Val* sizes) const {
  const size_t S = s.sizes.size();
  int64_t values[16];
  std::vector<int64_t> many;
  int64_t* v = values;
  if (S > std::size(values)) {
    many.resize(S);
    v = many.data();
  }
  for (size_t z = 0; z < S; ++z) v[z] = sizes[z].i;
  // The shape rule of operator `op` on this instance's shapes: its message, as the reference
  // engine gives it.
  auto fail = [&](const analysis::BlockOp& op) {
    SizeNamesScope names(plan_.size_names);
    std::string named;
    for (const ir::SizeArg& a : op.rhs->sizes)
      named += (named.empty() ? "" : ", ") + dim_str(a.dim) + " = " +
               std::to_string(size_value(a.dim, s.sizes.data(), v, S));
    std::vector<std::vector<int64_t>> in;
    for (const analysis::BlockOperand& o : op.operands)
      in.push_back(bind_sizes(o.local ? s.ops[o.index].shape : s.args[o.index].shape, s.sizes.data(), v, S));
    throw UserError(op.rhs->span.begin,
                    instance_shape_error(op.rhs->op, in, bind_attr_sizes(op.rhs->attrs, s.sizes.data(), v, S), named));
  };
  for (const analysis::SizeCheck& c : plan_.ragged[s.id].checks)
    if (size_value(c.small, s.sizes.data(), v, S) > size_value(c.large, s.sizes.data(), v, S)) fail(s.ops[c.op]);
  // No value may hold more elements than a tensor may (the checker bounds the fixed shapes).
  for (const analysis::BlockOp& op : s.ops) {
    if (op.size > 0) continue;
    int64_t n = 1;
    for (int64_t d : op.shape)
      if (__builtin_mul_overflow(n, size_value(d, s.sizes.data(), v, S), &n)) n = INT64_MAX;
    if (n > kMaxTensorElements) fail(op);
  }
}

}  // namespace acrobat
