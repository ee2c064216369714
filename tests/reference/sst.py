"""Stanford Sentiment Treebank reader for the PyTorch oracle (independent of acrobat's C++ reader).

Each non-empty line of train/dev/test.txt is one binary PTB s-expression:
  leaf:  (label word)
  inner: (label left right)
e.g. `(3 (2 It) (4 (2 's) (3 fun)))`. Labels are integers. Words are any run of characters other
than ASCII whitespace and parentheses (SST escapes literal parentheses as -LRB- / -RRB-).

The vocabulary file has one token per line; line i (0-based) is id i, line 0 is `<unk>`.
Words are looked up exactly (case-sensitive); unknown words map to id 0.
"""

import re

UNK_ID = 0
# Only ASCII whitespace separates tokens: SST contains a few words with a NO-BREAK SPACE inside
# (e.g. "8\u00a01\/2"), which belongs to the word.
_WS = " \t\r\n\f\v"
_TOKEN = re.compile(r"\(|\)|[^ \t\r\n\f\v()]+")


class Tree:
    """A binary SST tree node. Leaves have `word` (str) and `wid` (vocab id, set by index_tree);
    inner nodes have `left` and `right`."""

    __slots__ = ("label", "word", "wid", "left", "right")

    def __init__(self, label, word=None, left=None, right=None):
        self.label = label
        self.word = word
        self.wid = None
        self.left = left
        self.right = right

    @property
    def is_leaf(self):
        return self.left is None

    def leaves(self):
        """Leaf nodes left to right (iterative, no recursion limit issues)."""
        out, stack = [], [self]
        while stack:
            t = stack.pop()
            if t.is_leaf:
                out.append(t)
            else:
                stack.append(t.right)
                stack.append(t.left)
        return out

    def words(self):
        return [t.word for t in self.leaves()]

    def depth(self):
        return 1 if self.is_leaf else 1 + max(self.left.depth(), self.right.depth())

    def size(self):
        return 1 if self.is_leaf else 1 + self.left.size() + self.right.size()

    def to_sexpr(self):
        if self.is_leaf:
            return "(%d %s)" % (self.label, self.word)
        return "(%d %s %s)" % (self.label, self.left.to_sexpr(), self.right.to_sexpr())


class ParseError(ValueError):
    pass


def parse_tree(line):
    """Parses one s-expression into a Tree. Raises ParseError on anything that is not a
    well-formed binary tree with integer labels."""
    toks = _TOKEN.findall(line)
    if not toks:
        raise ParseError("empty tree")
    pos = 0

    def expect(cond, msg):
        if not cond:
            raise ParseError("%s at token %d in %r" % (msg, pos, line.strip()[:120]))

    # Explicit stack of partially built nodes: [label, children].
    stack = []
    root = None
    while pos < len(toks):
        t = toks[pos]
        if t == "(":
            expect(root is None, "text after the root")
            pos += 1
            expect(pos < len(toks), "unexpected end")
            lab = toks[pos]
            expect(re.fullmatch(r"-?\d+", lab) is not None, "label expected, got %r" % lab)
            pos += 1
            expect(pos < len(toks), "unexpected end")
            if toks[pos] not in ("(", ")"):
                # leaf: (label word)
                word = toks[pos]
                pos += 1
                expect(pos < len(toks) and toks[pos] == ")", "')' expected after leaf word")
                pos += 1
                node = Tree(int(lab), word=word)
                if stack:
                    stack[-1][1].append(node)
                else:
                    root = node
            else:
                stack.append([int(lab), []])
        elif t == ")":
            expect(bool(stack), "unbalanced ')'")
            lab, kids = stack.pop()
            expect(len(kids) == 2, "inner node with %d children (binary expected)" % len(kids))
            node = Tree(lab, left=kids[0], right=kids[1])
            pos += 1
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        else:
            expect(False, "unexpected token %r" % t)
    expect(not stack and root is not None, "unbalanced '('")
    return root


def load_trees(path, limit=0):
    """Trees of the first `limit` non-empty lines of `path` (all when limit is 0), in file order."""
    trees = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip(_WS):
                continue
            if limit and len(trees) >= limit:
                break
            try:
                trees.append(parse_tree(line))
            except ParseError as e:
                raise ParseError("%s:%d: %s" % (path, lineno, e))
    return trees


def load_vocab(path):
    """Returns (word -> id dict, V). V is the number of lines. Line 0 must be <unk>.
    If a token appears twice, its first line wins."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # trailing newline
    lines = [l[:-1] if l.endswith("\r") else l for l in lines]
    if not lines or lines[0] != "<unk>":
        raise ValueError("%s: line 0 must be <unk>, got %r" % (path, lines[0] if lines else None))
    vocab = {}
    for i, w in enumerate(lines):
        vocab.setdefault(w, i)
    return vocab, len(lines)


def index_tree(tree, vocab):
    """Sets `wid` on every leaf (unknown words -> 0). Returns the tree."""
    for leaf in tree.leaves():
        leaf.wid = vocab.get(leaf.word, UNK_ID)
    return tree


if __name__ == "__main__":
    # Self-check: every line of the given files parses and prints back to the same tokens.
    import sys

    for p in sys.argv[1:]:
        n = depth = 0
        with open(p, encoding="utf-8") as f:
            for line in f:
                if not line.strip(_WS):
                    continue
                t = parse_tree(line)
                assert _TOKEN.findall(t.to_sexpr()) == _TOKEN.findall(line), line
                n += 1
                depth = max(depth, t.depth())
        print("%s: %d trees parsed and round-tripped, max depth %d" % (p, n, depth))
