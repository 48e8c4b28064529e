"""The report as memdiag's schema 3 defines it (schema/report.schema.json in
the repository), and its writing: whole or not at all."""
import json
import math
import os
import stat
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


# The reader's bounds on the figures a job's own numbers make (report_reader.cpp):
# a loss, and the final parameters' sum and sum of squares (limits::kAbsurdMiB
# times 1e6 and 1e12), which weights that diverged without reaching inf pass.
_BOUNDS = {"loss": 1e30, "final_parameter_sum": 1024.0 ** 3 * 1e6,
           "final_parameter_sum_of_squares": 1024.0 ** 3 * 1e12}


def _non_finite(value, path, found, key=None):
    """`value` with every NaN or infinity, and every loss or parameter sum
    beyond what the reader accepts, replaced by None, their paths added to
    `found`: the reader refuses a report holding one."""
    if isinstance(value, float) and (not math.isfinite(value) or abs(value) > _BOUNDS.get(key, math.inf)):
        found.append(f"{path} ({value:g})")
        return None
    if isinstance(value, dict):
        return {k: _non_finite(v, f"{path}.{k}" if path else k, found, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_non_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def build(case, config, model, environment, samples, events, status):
    # A figure the reader would refuse (a loss or a weight that diverged)
    # is left out and said, rather than the whole report lost.
    found = []
    model = _non_finite(model, "model", found)
    samples = _non_finite(samples, "samples", found)
    events = _non_finite(events, "events", found)
    if found:
        events.append(event("note", "", None, "values that were not finite or beyond what a report holds, left out: " +
                            ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else ""), None))
    _drop_none(case, ["model", "description"])
    _drop_none(config, ["variant", "step_sampling", "batch_assumed", "batch_seen", "sequence_length"])
    _drop_none(model, ["largest_module_bytes", "buffer_bytes", "largest_buffers", "autocast", "checkpointing", "checkpoint_outside_mib", "outside_parameters_mib", "backward_profile", "forward_profile", "final_parameter_sum", "final_parameter_sum_of_squares"])
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


def check_output(path):
    """Why the recorder must not write `path`, or None: the rules
    memory_diagnostics keeps for its outputs (src/core/output_guard.cpp,
    atomic_file.cpp). It never replaces a directory, a symlink, a special
    file or a file that is not a memdiag report (a case file, a script),
    and the folder must let it write. Checked when recording starts, before
    the loop runs, and again at the write."""
    if not path:
        return "the path is empty"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"cannot be looked at ({e.strerror})"
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return "is a directory; name a file in it"
        if stat.S_ISLNK(st.st_mode):
            return "is a symbolic link; name the file itself"
        if not stat.S_ISREG(st.st_mode):
            return "is not a regular file (a FIFO or a device); name a file"
        if st.st_size > 0 and not _is_report(path):
            return "exists and is not a memdiag report; name another file"
        if not os.access(path, os.W_OK):
            return "is read-only"
    folder = os.path.dirname(os.path.abspath(path))
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{existing} is not a directory"
    try:  # proven by doing it: access() says yes to root where writes fail
        fd, probe = tempfile.mkstemp(prefix=".memdiag-", suffix=".probe", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"{existing} cannot be written ({e.strerror})"
    return None


def _is_report(path):
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        doc = json.loads(head) if len(head) < (1 << 16) else json.load(open(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and "schema_version" in doc and "samples" in doc


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, report):
    """Writes to a temporary file beside `path` and renames it over: a
    reader never sees half a report, and a failed write leaves the old one.
    The file's mode is the umask's (0644 under 022), as open() would make."""
    path = os.path.abspath(path)
    why = check_output(path)
    if why is not None:
        raise ValueError(f"memdiag: output {path}: {why}")
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".memdiag-", suffix=".json.tmp", dir=folder)
    os.fchmod(fd, 0o666 & ~_umask())
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
