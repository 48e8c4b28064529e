# prints each report's cleanup-phase allocated MiB per step (read from the report's samples)
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    s = r['samples']
    cl = [x for x in s if x.get('phase') == 'cleanup']
    keys = [k for k in cl[0].keys()] if cl else []
    def mib(x):
        for k in ('allocated_mib',):
            if k in x: return x[k] * 1.0
        return None
    vals = [round(mib(x), 2) for x in cl]
    d = [round(b - a, 2) for a, b in zip(vals, vals[1:])]
    print(f, 'cleanup MiB:', vals, '\n   deltas:', d)
