"""A deployment that spans several nodes, as pure data: whose GPU and whose process a reading is, how a name is
shown, and each node's command line after the flags were edited once.

The GPUs of a two-node deployment are two hosts' GPU 0..7, and their PIDs come from two PID spaces. Rather than
teach every consumer of a `GpuSnapshot` (release wait, attribution, baseline, stall detection, panels) about
hosts, the readings of node N are given keys no other node's can collide with: GPU `N * NODE_STRIDE + index` and
PID `N << PID_SHIFT | pid`. On one node (N = 0) the keys are the plain indices and PIDs, so a single-node
deployment is exactly what it was. Only what is shown to a person turns keys back into `host:index`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tui.model import GpuSample

#: GPU key = node * NODE_STRIDE + the host's own index (no host has 1000 GPUs)
NODE_STRIDE = 1000
#: PID key = node << PID_SHIFT | the host's own PID (Linux PIDs are below 2**22)
PID_SHIFT = 32


def gpu_key(node: int, index: int) -> int:
    return node * NODE_STRIDE + index


def split_gpu(key: int) -> tuple[int, int]:
    return divmod(key, NODE_STRIDE)


def pid_key(node: int, pid: int) -> int:
    return (node << PID_SHIFT) | pid


def split_pid(key: int) -> tuple[int, int]:
    return key >> PID_SHIFT, key & ((1 << PID_SHIFT) - 1)


def ranges(indices: Iterable[int]) -> str:
    """`0,1,2,3,5` -> `0-3,5`."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)))
    return ",".join(out)


def describe_gpus(keys: Iterable[int], names: Sequence[str] = ()) -> str:
    """`0-3,5` on one node; `gpu-a:0-7 gpu-b:2,3` across nodes (`names`: the nodes' hosts, head first)."""
    by_node: dict[int, list[int]] = {}
    for k in keys:
        n, i = split_gpu(k)
        by_node.setdefault(n, []).append(i)
    if len(names) <= 1 and set(by_node) <= {0}:
        return ranges(by_node.get(0, []))
    return " ".join(f"{node_name(n, names)}:{ranges(ix)}" for n, ix in sorted(by_node.items()))


def host_names(gpus: Iterable[GpuSample]) -> tuple[str, ...]:
    """The nodes' hosts by node number, from the GPUs of a merged snapshot (empty on one node)."""
    names: dict[int, str] = {}
    for g in gpus:
        if g.host:
            names.setdefault(split_gpu(g.index)[0], g.host)
    return tuple(names.get(i, f"node{i}") for i in range(max(names) + 1)) if names else ()


def gpu_label(g: GpuSample) -> str:
    """A GPU as a person names it: `3`, or `gpu-b:3` on a node's host."""
    return f"{g.host}:{split_gpu(g.index)[1]}" if g.host else str(g.index)


def describe_pid(key: int, names: Sequence[str] = ()) -> str:
    n, pid = split_pid(key)
    return str(pid) if len(names) <= 1 and n == 0 else f"{node_name(n, names)}:{pid}"


def node_name(node: int, names: Sequence[str]) -> str:
    return names[node] if 0 <= node < len(names) else f"node{node}"


#: a single-dash option, as argparse reads one: `-tp`, `-dpr=2`, `-r1` (a one-letter option with its value attached);
#: `-1` is a value
_SHORT = re.compile(r"-(?P<name>[A-Za-z]+)(?:\d+|=.*)?")


def _option_name(word: str) -> str | None:
    """The option a word of a command line names, or None for a value (or the program). vLLM's parser takes
    `--flag=value`, and `--flag_name` as `--flag-name` (FlexibleArgumentParser.parse_args, vllm/utils/argparse_utils.py
    0.34.0; vllm/utils.py 0.8.5): both name the option they spell, so a node's own flag is its own in every spelling.
    A single-dash option (vLLM's `-r` for --node-rank) is named by its short spelling: the preset lists both."""
    if word.startswith("--") and len(word) > 2:
        name, dot, rest = word[2:].split("=", 1)[0].partition(".")  # `--json-arg.key`: dashes before the first dot
        return name.replace("_", "-") + dot + rest
    m = _SHORT.fullmatch(word)
    return m["name"] if m else None


def _options(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The program (everything before the first option) and each option with the words that follow it."""
    prefix: list[str] = []
    opts: list[tuple[str, list[str]]] = []
    for word in argv:
        name = _option_name(word)
        if name is not None:
            opts.append((name, [word]))
        elif opts:
            opts[-1][1].append(word)
        else:
            prefix.append(word)
    return prefix, opts


def node_argv(before: Sequence[str], after: Sequence[str], node_now: Sequence[str],
              node_specific: Iterable[str]) -> list[str]:
    """A worker node's command line after the head's was edited from `before` to `after`: the same edit (flags
    added, removed or given another value) applied to the node's own line, and nothing else. What differs between
    nodes (the node-specific flags, SGLang `--node-rank`, vLLM `--headless`, `--node-rank 1` / `-r 1`, in any
    spelling its parser takes; a path, an address) is left as the node has it: flags are edited once, for the
    deployment, and never overwrite what makes a node that node. `node_specific`: names without dashes, long
    (`node-rank`) or short (`r`)."""
    specific = {n for f in node_specific if (n := _option_name("--" + f.lstrip("-")))}
    _, old = _options(before)
    _, new = _options(after)
    old_by = _grouped(old)
    new_by = _grouped(new)
    touched = {n for n in old_by.keys() | new_by.keys() if old_by.get(n) != new_by.get(n)} - specific
    prefix, own = _options(node_now)
    out = list(prefix)
    for name, words in own:
        if name not in touched:
            out += words
    for name in new_by:  # in the edited line's order
        if name in touched:
            for words in new_by[name]:
                out += words
    return out


def _grouped(opts: list[tuple[str, list[str]]]) -> dict[str, list[list[str]]]:
    by: dict[str, list[list[str]]] = {}
    for name, words in opts:
        by.setdefault(name, []).append(words)
    return by
