"""The report as memdiag's schema 3 defines it (schema/report.schema.json in
the repository), and its writing: whole or not at all."""
import json
import math
import os
import tempfile

SCHEMA_VERSION = 3
PRODUCER = "memdiag.record (Python)"


def _version():
    from . import __version__
    return __version__


def event(kind, phase, step, message, mib):
    return {"kind": kind, "phase": phase or "", "step": step, "message": message, "mib": mib}


def _drop_none(d, keys):
    for k in keys:
        if k in d and d[k] is None:
            del d[k]


def _micro_batches(samples):
    """micro_batch only where a step had more than one (gradient
    accumulation), as memory_diagnostics writes it."""
    forwards = {}
    for s in samples:
        if s["phase"] == "forward":
            forwards[s["step"]] = forwards.get(s["step"], 0) + 1
    for s in samples:
        if "micro_batch" in s and forwards.get(s["step"], 0) <= 1:
            del s["micro_batch"]


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def build(case, config, model, environment, samples, events, status):
    _drop_none(case, ["model", "description"])
    _drop_none(config, ["variant", "step_sampling"])
    _drop_none(model, ["largest_module_bytes", "final_parameter_sum", "final_parameter_sum_of_squares"])
    environment["memdiag_version"] = _version()
    _micro_batches(samples)
    for s in samples:
        if s.get("alloc_retries") is None:
            s.pop("alloc_retries", None)
        if "loss" in s:
            s["loss"] = _finite(s["loss"])
            if s["loss"] is None:
                del s["loss"]
    return {
        "schema_version": SCHEMA_VERSION,
        "case": case,
        "config": config,
        "producer": {"name": PRODUCER, "version": _version()},
        "model": model,
        "environment": environment,
        "samples": samples,
        "events": events,
        "status": status,
    }


def output_for_rank(output, rank, world_size):
    """The report path of one rank, as memory_diagnostics names them
    (output_for_rank in src/core/output_names.cpp): "{rank}" replaced by the
    rank; without it, a world of more than one gets "-rankK" before the
    extension (ddp.json -> ddp-rank1.json), so ranks never write one file."""
    if "{rank}" in output:
        return output.replace("{rank}", str(rank))
    if world_size <= 1:
        return output
    folder, name = os.path.split(output)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    return os.path.join(folder, f"{stem}-rank{rank}" + (f".{ext}" if ext else ""))


def rank_and_world():
    """This process's rank and world: the process group's where one is
    initialised, else a launcher's RANK and WORLD_SIZE (torchrun sets both
    before the job's first line), else rank 0 of 1."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None and world is None:
        return 0, 1
    try:
        r, w = int(rank), int(world)
    except (TypeError, ValueError):
        raise ValueError(f"memdiag: RANK={rank!r} WORLD_SIZE={world!r}: a launcher sets both, whole numbers with "
                         "0 <= RANK < WORLD_SIZE") from None
    if not 0 <= r < w:
        raise ValueError(f"memdiag: RANK={rank!r} WORLD_SIZE={world!r}: a launcher sets both, whole numbers with "
                         "0 <= RANK < WORLD_SIZE")
    return r, w


def write_atomic(path, report):
    """Writes to a temporary file beside `path` and renames it over: a
    reader never sees half a report, and a failed write leaves the old one."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".memdiag-", suffix=".json.tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=2, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
