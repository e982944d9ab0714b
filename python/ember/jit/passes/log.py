"""How passes report what they rewrote, and the per-pass rewrite limit.

Every rewrite a pass makes goes through `RewriteLog.rewrite(pass_name,
message, node)`: the log counts it against the pass's limit (when the
limit is spent the rewrite is refused and the pass leaves that spot alone)
and records a one-line message such as "t(t(%x)) -> %x (line 3 of f)", the
line counted from the function's first source line.
`explain()` in manager.py prints those messages; bisecting a wrong rewrite
uses the limits (EMBER_JIT_OPT_LIMIT, documented in manager.py).
"""

import os

PASS_NAMES = ("constant_fold", "peephole", "cse", "dce", "unroll", "fusion",
              "fold_conv_bn")


def parse_opt_limit(text):
    """'peephole=2,cse=0' -> {'peephole': 2, 'cse': 0}; ValueError if bad."""
    limits = {}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        name, eq, count = item.partition("=")
        name = name.strip()
        if not eq or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"EMBER_JIT_OPT_LIMIT: expected 'pass=N', got {item!r}")
        if name not in PASS_NAMES:
            raise ValueError(f"EMBER_JIT_OPT_LIMIT: unknown pass {name!r} "
                             f"(passes: {', '.join(PASS_NAMES)})")
        limits[name] = max(0, int(count))
    return limits


class RewriteLog:
    """Counts and records rewrites; refuses those past a pass's limit."""

    def __init__(self, limits=None):
        if limits is None:
            limits = parse_opt_limit(os.environ.get("EMBER_JIT_OPT_LIMIT", ""))
        self.limits = dict(limits)
        self.counts = {}
        self.entries = []       # [(pass name, message)]

    def allow(self, pass_name):
        """Whether one more rewrite of `pass_name` is allowed (and counts it)."""
        used = self.counts.get(pass_name, 0)
        if pass_name in self.limits and used >= self.limits[pass_name]:
            return False
        self.counts[pass_name] = used + 1
        return True

    def rewrite(self, pass_name, message, node=None):
        """allow() and, when allowed, record `message` (with the node's line)."""
        if not self.allow(pass_name):
            return False
        source_range = getattr(node, "source_range", None)
        if source_range is not None:
            message += f" ({source_range.where_in_function()})"
        self.entries.append((pass_name, message))
        return True


def log_or_default(log):
    return log if log is not None else RewriteLog()
