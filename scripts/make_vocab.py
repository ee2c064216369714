#!/usr/bin/env python3
"""Builds the word vocabulary of the Stanford Sentiment Treebank from its PTB-format tree files.

Collects every leaf word of the given files (one tree per line, e.g. `(3 (2 It) (4 (2 's) (3 fun)))`)
and writes `<unk>` followed by the distinct words, most frequent first, ties in code-point order.
Line i (0-based) of the output is the word with id i, the format acrobat::io::Vocabulary::load reads.
Words are kept as they are (case-sensitive); only ASCII whitespace and parentheses delimit them,
like the C++ reader (SST has words with a NO-BREAK SPACE inside).

Usage: scripts/make_vocab.py [-o data/sst/vocab.txt] [data/sst/train.txt data/sst/dev.txt ...]
Standard library only. Prints the vocabulary size (`<unk>` included).
"""

import argparse
import collections
import os
import re
import sys

UNK = "<unk>"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_INPUTS = [os.path.join(ROOT, "data", "sst", name + ".txt") for name in ("train", "dev", "test")]
DEFAULT_OUTPUT = os.path.join(ROOT, "data", "sst", "vocab.txt")

_TOKEN = re.compile(r"\(|\)|[^ \t\r\n\f\v()]+")


def leaf_words(line, where):
    """The leaf words of one tree, left to right. A leaf is `( label word )`."""
    tokens = _TOKEN.findall(line)
    words = []
    depth = 0
    for i, tok in enumerate(tokens):
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                sys.exit("%s: unbalanced ')'" % where)
        elif i >= 2 and tokens[i - 2] == "(" and i + 1 < len(tokens) and tokens[i + 1] == ")":
            words.append(tok)  # `( label word )`
    if depth != 0:
        sys.exit("%s: unbalanced '('" % where)
    return words


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", default=DEFAULT_INPUTS, help="PTB tree files")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT, help="vocabulary file to write")
    args = parser.parse_args()

    counts = collections.Counter()
    for path in args.inputs:
        with open(path, encoding="utf-8-sig") as f:  # utf-8-sig: tolerate a byte order mark
            for number, line in enumerate(f, 1):
                if line.strip():
                    counts.update(leaf_words(line, "%s:%d" % (path, number)))
    counts.pop(UNK, None)  # id 0 already stands for it

    words = sorted(counts, key=lambda w: (-counts[w], w))
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(UNK + "\n")
        for w in words:
            f.write(w + "\n")
    print(len(words) + 1)


if __name__ == "__main__":
    main()
