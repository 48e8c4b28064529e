"""Largest batch that completes under memdiag.limit_memory(budget) in fresh
processes: bisection over scripts/profile-capacity-check.py --run."""
import json, subprocess, sys, time
job, lo, hi, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
deadline = time.time() + float(sys.argv[5])
def ok(b):
    p = subprocess.run([sys.executable, "scripts/profile-capacity-check.py", "--run", job, str(b), "--device", "cuda",
                        "--out", f"/tmp/bis-{job}.json", "--limit", str(budget)], capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")]
    r = json.loads(line[-1]) if line else {"status": f"rc{p.returncode}"}
    print(job, b, r, flush=True)
    return r["status"] == "complete"
if not ok(lo):
    print(job, "lo fails", lo); sys.exit()
if ok(hi):
    print(job, "hi fits", hi); sys.exit()
while hi - lo > 1 and time.time() < deadline:
    mid = (lo + hi) // 2
    if ok(mid): lo = mid
    else: hi = mid
print(f"RESULT {job} {lo} fits, {hi} does not" + ("" if hi - lo == 1 else " (stopped)"), flush=True)
