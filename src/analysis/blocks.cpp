// Static block formation.
//
// Algorithm: walk every IR block of every function (the bodies of ifs and match clauses included).
// A static block starts at a tensor operator and extends over the following bindings until one that
// ends it (call, if, match, tensor-to-host read); its last binding is its last tensor operator. Host
// bindings inside it (parameter loads, embedding lookups, host arithmetic, copies) run as the host
// program records the block. Then, per block:
//  - operands: a variable defined by an earlier batched operator of the block (directly, through
//    copies, or through a tuple built and taken apart inside the block) is local; any other variable
//    is an argument, one per distinct variable;
//  - escape: an output escapes when a later binding of the IR block (nested blocks included) or its
//    result reads it, propagated back through host bindings inside the block;
//  - views and bias fusion as described in blocks.h;
//  - argument modes from the reuse analysis; a constant (an operator without operands, evaluated
//    once) is reuse too. Without the analysis modes stay unknown and the engine checks per batch.
#include "analysis/blocks.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ir/walk.h"

namespace acrobat::analysis {

bool is_tensor_op(const ir::Rhs& r) {
  return r.kind == ir::RhsKind::Op && op_info(r.op).op_class != OpClass::HostRead;
}

bool is_batched_op(const ir::Rhs& r) {
  return is_tensor_op(r) && (!r.args.empty() || !r.sizes.empty());
}

bool ends_block(const ir::Rhs& r) {
  return r.kind == ir::RhsKind::Call || r.kind == ir::RhsKind::If ||
         r.kind == ir::RhsKind::Match ||
         (r.kind == ir::RhsKind::Op && op_info(r.op).op_class == OpClass::HostRead);
}

int64_t view_offset(const StaticBlock& s, const BlockOp& op) {
  const auto& in = s.ops[op.operands[0].index].shape;
  int axis = normalize_axis(op.rhs->attrs.ints[2], in.size());
  int64_t inner = 1;
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  return op.rhs->attrs.ints[0] * inner;
}

namespace {

// The binding that defines each variable of a function (parameters and pattern variables: none).
void collect_definitions(const ir::Block& b, std::vector<const ir::Rhs*>& defs) {
  ir::for_each_block(b, [&](const ir::Block& block) {
    for (const auto& bind : block.bindings) defs[bind.var] = bind.rhs.get();
  });
}

// Slices of a leading-1 region (the common [1, H] rows) become views; a view that escapes keeps the
// operator it views alive too.
void mark_views(StaticBlock& s) {
  for (size_t k = s.ops.size(); k-- > 0;) {
    BlockOp& op = s.ops[k];
    if (op.rhs->op != OpId::Slice || !op.operands[0].local) continue;
    const auto& in = s.ops[op.operands[0].index].shape;
    int axis = normalize_axis(op.rhs->attrs.ints[2], in.size());
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= in[d];
    if (outer != 1) continue;
    op.view = true;
    if (op.escapes) s.ops[op.operands[0].index].escapes = true;
  }
}

void mark_bias_fusion(StaticBlock& s) {
  std::vector<int> uses(s.ops.size(), 0);
  for (const auto& op : s.ops)
    for (const auto& o : op.operands)
      if (o.local) uses[o.index]++;
  for (size_t k = 0; k + 1 < s.ops.size(); ++k) {
    BlockOp& mm = s.ops[k];
    BlockOp& add = s.ops[k + 1];
    if (mm.rhs->op != OpId::MatMul || mm.escapes || uses[k] != 1 || mm.operands[1].local ||
        add.rhs->op != OpId::Add || add.shape != mm.shape || mm.shape.size() != 2)
      continue;
    const BlockArg& weights = s.args[mm.operands[1].index];
    if (weights.known && weights.mode != ArgMode::Reuse) continue;
    for (int side = 0; side < 2; ++side) {
      const BlockOperand& self = add.operands[side];
      const BlockOperand& bias = add.operands[1 - side];
      if (!self.local || self.index != static_cast<int>(k) || bias.local) continue;
      const BlockArg& b = s.args[bias.index];
      if (is_ragged(b.shape) || num_elements(b.shape) != mm.shape[1] || b.shape.back() != mm.shape[1])
        continue;
      if (b.known && b.mode != ArgMode::Reuse) continue;
      mm.bias_arg = bias.index;
      add.fused = true;
      break;
    }
  }
}

class BlockFormer {
 public:
  BlockFormer(const ir::Module& m, const ReuseInfo* reuse) : m_(m), reuse_(reuse) {}

  std::vector<StaticBlock> run() {
    for (size_t f = 0; f < m_.functions.size(); ++f) {
      func_ = static_cast<int>(f);
      defs_.assign(m_.functions[f].vars.size(), nullptr);
      collect_definitions(m_.functions[f].body, defs_);
      walk(m_.functions[f].body);
    }
    return std::move(blocks_);
  }

 private:
  void walk(const ir::Block& b) {
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      if (is_tensor_op(r)) {
        i = form(b, i);
        continue;
      }
      walk(r.then_block);
      walk(r.else_block);
      for (const auto& c : r.clauses) walk(c.body);
      ++i;
    }
  }

  // Forms the block starting at bindings[begin]; returns the index after it.
  size_t form(const ir::Block& b, size_t begin) {
    StaticBlock s;
    s.id = static_cast<int>(blocks_.size());
    s.function = func_;
    s.block = &b;
    s.begin = begin;
    s.end = begin;
    size_t j = begin;
    for (; j < b.bindings.size() && !ends_block(*b.bindings[j].rhs); ++j)
      if (is_tensor_op(*b.bindings[j].rhs)) s.end = j + 1;

    std::set<int> used;
    ir::vars_read(b, s.end, used);
    for (size_t k = s.end; k-- > begin;) {
      const ir::Binding& bind = b.bindings[k];
      if (!is_tensor_op(*bind.rhs) && used.count(bind.var)) ir::vars_read(*bind.rhs, used);
    }

    std::map<int, int> local;  // variable -> operator index
    std::map<int, int> arg_of;  // variable -> argument index
    std::map<int, std::vector<int>> tuples;  // tuple variable -> operator index per field, or -1
    for (size_t k = begin; k < s.end; ++k) {
      const ir::Binding& bind = b.bindings[k];
      const ir::Rhs& r = *bind.rhs;
      if (r.kind == ir::RhsKind::Copy && r.args[0].kind == ir::Atom::Var &&
          local.count(r.args[0].var)) {
        local[bind.var] = local[r.args[0].var];
        continue;
      }
      // Tuples of the block's own values (a split destructured by `let`) stay local field by field.
      if (r.kind == ir::RhsKind::MakeTuple) {
        std::vector<int> fields;
        for (const auto& a : r.args) {
          auto l = a.kind == ir::Atom::Var ? local.find(a.var) : local.end();
          fields.push_back(l == local.end() ? -1 : l->second);
        }
        tuples[bind.var] = std::move(fields);
        continue;
      }
      if (r.kind == ir::RhsKind::Proj && r.args[0].kind == ir::Atom::Var) {
        auto t = tuples.find(r.args[0].var);
        if (t != tuples.end() && t->second[r.index] >= 0) local[bind.var] = t->second[r.index];
        continue;
      }
      if (!is_batched_op(r)) continue;
      if (s.name.empty()) s.name = r.span.begin.str();
      const bool ragged = is_ragged(r.type->shape);
      BlockOp op{&r, bind.var, {}, r.type->shape, ragged ? 0 : num_elements(r.type->shape),
                 used.count(bind.var) > 0};
      for (const ir::SizeArg& z : r.sizes) {
        if (std::find(s.sizes.begin(), s.sizes.end(), z.dim) != s.sizes.end()) continue;
        s.sizes.push_back(z.dim);
        s.size_vars.push_back(z.value.var);
      }
      for (const auto& a : r.args) {
        auto l = local.find(a.var);
        if (l != local.end()) {
          op.operands.push_back(BlockOperand{true, l->second});
          continue;
        }
        auto [it, fresh] = arg_of.emplace(a.var, static_cast<int>(s.args.size()));
        if (fresh) s.args.push_back(make_arg(a.var));
        op.operands.push_back(BlockOperand{false, it->second});
      }
      s.flops += r.flops;
      local[bind.var] = static_cast<int>(s.ops.size());
      s.ops.push_back(std::move(op));
    }
    // Escapes through copies: a copy of an operator's output that escapes makes it escape.
    for (auto [var, index] : local)
      if (used.count(var)) s.ops[index].escapes = true;

    for (const auto& op : s.ops)
      for (size_t a = 0; a < op.operands.size(); ++a) {
        if (op.operands[a].local) continue;
        BlockArg& arg = s.args[op.operands[a].index];
        if (!(op.rhs->op == OpId::MatMul && a == 1)) arg.weights_only = false;
        if (op.rhs->op != OpId::Concat) arg.concat_only = false;
      }
    if (!s.ragged()) mark_views(s);  // ragged blocks decide their views per batch
    mark_bias_fusion(s);
    bool any_lazy = false;
    for (const auto& a : s.args) any_lazy = any_lazy || a.may_be_lazy;
    s.static_depth = any_lazy ? 0 : 1;
    if (s.name.empty()) s.name = b.bindings[begin].rhs->span.begin.str();
    blocks_.push_back(std::move(s));
    return j;
  }

  BlockArg make_arg(int var) {
    const ir::Function& f = m_.functions[func_];
    BlockArg a;
    a.var = var;
    a.shape = f.vars[var].type->shape;
    const ir::Rhs* def = defs_[var];
    if (def && def->kind == ir::RhsKind::Op && def->args.empty() && def->sizes.empty()) {
      a.may_be_lazy = false;  // a constant
      a.mode = ArgMode::Reuse;
    } else if (def && (def->kind == ir::RhsKind::ParamLoad || def->kind == ir::RhsKind::ParamIndex ||
                       def->kind == ir::RhsKind::ParamGather)) {
      a.may_be_lazy = false;
    }
    if (reuse_) {
      a.known = true;
      const Origin& o = reuse_->origins[func_][var];
      if (a.mode != ArgMode::Reuse || a.may_be_lazy) {
        a.mode = o.mode;
        a.param = o.param;
      }
      if (o.mode != ArgMode::Scatter) a.may_be_lazy = false;
    }
    return a;
  }

  const ir::Module& m_;
  const ReuseInfo* reuse_;
  int func_ = 0;
  std::vector<const ir::Rhs*> defs_;
  std::vector<StaticBlock> blocks_;
};

}  // namespace

std::vector<StaticBlock> form_static_blocks(const ir::Module& module, const ReuseInfo* reuse) {
  return BlockFormer(module, reuse).run();
}

}  // namespace acrobat::analysis
