"""The binary Tree-LSTM (tests/reference/models.py's TreeLSTM, its weights) hand-batched across a batch
of trees by node height, the level-by-level batching a careful PyTorch user writes: all leaves in
one product, then every node of height 1, 2, ... in one product per height, the classifier of every
node in one product at the end. The PyTorch baseline of bench/train_treelstm.py and
bench/train_accuracy.py."""

import torch
import torch.nn.functional as F


class LevelPlan:
    """A batch of trees laid out by node height: level 0 holds every leaf, level k every node of
    height k; `left`/`right` index the children in the concatenation of the levels below, `labels`
    every node's label in level order, `roots` each tree's root."""

    def __init__(self, trees):
        nodes = []  # (height, wid, left, right, label)
        roots = []
        for t in trees:
            stack, done = [(t, False)], {}
            while stack:
                n, expanded = stack.pop()
                if n.is_leaf:
                    done[id(n)] = len(nodes)
                    nodes.append((0, n.wid, -1, -1, n.label))
                elif expanded:
                    l, r = done[id(n.left)], done[id(n.right)]
                    done[id(n)] = len(nodes)
                    nodes.append((1 + max(nodes[l][0], nodes[r][0]), -1, l, r, n.label))
                else:
                    stack += [(n, True), (n.right, False), (n.left, False)]
            roots.append(done[id(t)])
        levels = [[] for _ in range(1 + max(n[0] for n in nodes))]
        for i, n in enumerate(nodes):
            levels[n[0]].append(i)
        position, k = [0] * len(nodes), 0
        for level in levels:
            for i in level:
                position[i] = k
                k += 1
        self.wids = torch.tensor([nodes[i][1] for i in levels[0]])
        self.left = [torch.tensor([position[nodes[i][2]] for i in level]) for level in levels[1:]]
        self.right = [torch.tensor([position[nodes[i][3]] for i in level]) for level in levels[1:]]
        self.labels = torch.tensor([nodes[i][4] for level in levels for i in level])
        self.roots = torch.tensor([position[r] for r in roots])  # each tree's root, in level order


def level_batched_scores(m, plan, sparse=False):
    """Every node's log-probabilities [nodes, C], in level order. `sparse`: the embedding's gradient
    is a sparse tensor of the rows looked up (nn.Embedding(sparse=True), for SparseAdam)."""
    x = F.embedding(plan.wids, m.emb, sparse=sparse)
    i, o, u = torch.split(x @ m.W_leaf + m.b_leaf, m.H, dim=1)
    c = torch.sigmoid(i) * torch.tanh(u)
    h = torch.sigmoid(o) * torch.tanh(c)
    hs, cs = h, c
    # The children's matrices as one [2H, 5H] (a view): one product per level.
    U = m.U_node.reshape(2 * m.H, 5 * m.H)
    for left, right in zip(plan.left, plan.right):
        gates = torch.cat([hs.index_select(0, left), hs.index_select(0, right)], dim=1) @ U + m.b_node
        i, fl, fr, o, u = torch.split(gates, m.H, dim=1)
        c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cs.index_select(0, left) +
             torch.sigmoid(fr) * cs.index_select(0, right))
        h = torch.sigmoid(o) * torch.tanh(c)
        hs, cs = torch.cat([hs, h]), torch.cat([cs, c])
    return F.log_softmax(hs @ m.W_out + m.b_out, dim=1)


def level_batched_loss(m, plan, count, sparse=False):
    """The batch's mean loss (the sum over its trees' nodes / count)."""
    logp = level_batched_scores(m, plan, sparse)
    return -logp.gather(1, plan.labels.unsqueeze(1)).sum() / count


