#!/usr/bin/env python3
"""What is live at a phase's peak, from a memory_diagnostics snapshot.

Reads a --memory-snapshot pickle (the CUDA caching allocator's trace, each
allocation made on the main thread labelled "phase=P step=S"; backward's
own thread's allocations carry no label, so the phase is the span between
its first labelled event and the next phase's) and prints, for one phase of
one step: the allocated MiB at the phase's start and at its peak; the
allocations made within the phase that are live at the peak, largest first;
the tensors live at the start that were freed by the peak; and, with
--size-mib, how many allocations of that size made within the phase were
ever live at once.

    python3 scripts/phase-peak.py SNAPSHOT.pickle [--phase backward] [--step 1] [--size-mib MiB]

Figures are of the trace alone: what was allocated before recording began
(memory_diagnostics starts it after the probe, before the warm-up) is not in
them, a few MiB against the report's figures. Needs only Python's pickle.
"""
import argparse
import pickle
import sys

MIB = 2 ** 20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("--phase", default="backward")
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--size-mib", type=float, help="count the allocations of this size (within 2 MiB) live at once")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    trace = pickle.load(open(a.snapshot, "rb"))["device_traces"][0]
    label = f"phase={a.phase} step={a.step}"
    start = next((i for i, e in enumerate(trace) if e["user_metadata"] == label), None)
    if start is None:
        sys.exit(f"phase-peak: no allocation labelled {label!r} in {a.snapshot}")
    end = next((i for i in range(start, len(trace))
                if trace[i]["user_metadata"] not in ("", label)), len(trace))
    live, at_start, peak, most = {}, None, None, 0
    for i, e in enumerate(trace[:end]):
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], i)
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
        if i == start - 1:
            at_start = dict(live)
        if i >= start:
            total = sum(s for s, _ in live.values())
            if peak is None or total > peak[0]:
                peak = (total, dict(live))
            if a.size_mib:
                most = max(most, sum(1 for s, j in live.values()
                                     if j >= start and abs(s / MIB - a.size_mib) <= 2))
    start_mib = sum(s for s, _ in at_start.values()) / MIB
    print(f"{label}: allocated {start_mib:.1f} MiB at its start, {peak[0] / MIB:.1f} MiB at its peak "
          f"(+{peak[0] / MIB - start_mib:.1f})")
    made = sorted((s for s, j in peak[1].values() if j >= start), reverse=True)
    print(f"made within it and live at the peak: {sum(made) / MIB:.1f} MiB in {len(made)} allocations; largest: "
          + ", ".join(f"{s / MIB:.1f}" for s in made[:a.top]))
    freed = sorted((s for addr, (s, j) in at_start.items() if peak[1].get(addr, (0, -1))[1] != j), reverse=True)
    print(f"live at its start, freed by the peak: {sum(freed) / MIB:.1f} MiB in {len(freed)} allocations; largest: "
          + ", ".join(f"{s / MIB:.1f}" for s in freed[:a.top]))
    if a.size_mib:
        print(f"allocations of {a.size_mib:g} MiB made within it, live at once at most: {most}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
