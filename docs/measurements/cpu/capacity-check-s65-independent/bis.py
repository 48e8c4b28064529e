import os, subprocess, sys
# bisect.py JOB BUDGET START  -> largest batch whose 2-step counted peak <= BUDGET
job, N, s = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def peak(b): return float(subprocess.run(["python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "count.py"), job, str(b)], capture_output=True, text=True).stdout)
seen = {}
def f(b):
    if b not in seen: seen[b] = peak(b); print(f"  {job} b={b}: {seen[b]:.3f} MiB {'fits' if seen[b] <= N else 'over'}", flush=True)
    return seen[b]
lo, hi = None, None  # lo fits, hi over
b = s
if f(b) <= N:
    lo = b; step = 1
    while hi is None:
        nb = lo + step
        if f(nb) <= N: lo = nb; step *= 2
        else: hi = nb
else:
    hi = b; step = 1
    while lo is None:
        nb = max(1, hi - step)
        if f(nb) <= N: lo = nb
        else: hi = nb; step *= 2
while hi - lo > 1:
    m = (lo + hi) // 2
    if f(m) <= N: lo = m
    else: hi = m
print(f"TRUTH {job} N={N} T={lo} (peak {seen[lo]:.3f}; {hi}: {seen[hi]:.3f})")
