// The recorder's steady lane: the hooks of a steady training step, with no
// Python frame of the recorder's between torch and the readings.
//
// Why: on the H200's and the H100's hosts a recorded launch-bound step paid
// 100-250 us of the recorder's Python (its state machine at seven hooks,
// four phase closes, the inputs' sizes, the census's bookkeeping) beside
// 20-40 us of readings; a 3 ms step cannot be recorded within 2% that way.
//
// How: memdiag/_recorder.py stays the one authority on what a loop did. It
// hands a step's state to this lane (adopt) only where the loop is in its
// steady pattern: one optimizer, no micro-batches, past the steps whose
// cleanups are walked and whose forwards are read by module, no sync. The
// lane then does for each hook exactly what the recorder's Python does on
// that pattern (the same readings, in the same order, the same samples)
// and, at anything else (a nested or evaluation forward, a skipped step(),
// a second forward before backward, a closure), hands the state back
// (export, through the recorder's _lane_spill) and calls the recorder's own
// hook. Samples are kept here as numbers and become the recorder's tuples
// when the state is handed back (take).
//
// Phases are codes here; memdiag/_lane.py maps them to the recorder's names.
#include <time.h>

#include <algorithm>

#include <ATen/core/grad_mode.h>

#include "readings.hpp"

namespace py = pybind11;

namespace memdiag_native {
namespace {

// The recorder's phases and states (memdiag/_lane.py: PHASES).
enum Code : int { kNone = 0, kForward = 1, kBackward = 2, kStep = 3, kCleanup = 4, kBetween = 5 };

constexpr double kMiB = 1048576.0;

// What the lane's time goes to, counted where the recorder asks for it
// (MEMDIAG_LANE_PROFILE=1, memdiag/_lane.py: profile): the hooks' bodies,
// then the parts inside them. Off, each part costs one branch.
enum Part : int {
  kHookForwardPre, kHookForwardPost, kHookStepPre, kHookStepPost, kHookBeforeBackward, kHookAfterBackward,
  kHookAfterZeroGrad, kPartFigures, kPartDeviceUsed, kPartProcess, kPartHost, kPartCensus, kPartSizes,
  kPartLoss, kPartResetPeak, kPartSample, kParts
};
constexpr const char* kPartNames[kParts] = {
    "hook forward_pre", "hook forward_post", "hook step_pre", "hook step_post", "hook before_backward",
    "hook after_backward", "hook after_zero_grad", "allocator figures", "device used (cudaMemGetInfo)",
    "process (NVML, Python)", "host (Python)", "census", "inputs' sizes", "loss copy", "peak reset",
    "sample kept"};

double now_ms() {
  // time.perf_counter's clock: the recorder's phase clock is the same.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct Census {
  double parameters;
  double gradients;
  double optimizer_state;
  bool operator==(const Census& o) const {
    return parameters == o.parameters && gradients == o.gradients && optimizer_state == o.optimizer_state;
  }
};

// One phase's sample, as the recorder's _close makes it.
struct Sample {
  int phase;
  std::int64_t step;
  Figures figures;
  std::int64_t used;  // the device's use as the probe holds it after the reading
  py::object process_mib;  // None or a float
  double elapsed_ms;
  int extra;  // 0: none; kForward: micro and inputs; kBackward: micro; kStep: losses
  std::int64_t micro;
  py::object inputs;  // (samples, tokens), a forward's
  std::vector<std::int64_t> losses;
  bool has_census;
  Census census;
  py::object host;  // (pages, pinned) or (None, None)
};

class Lane {
 public:
  // hooks: the recorder's Python hooks for the model
  // and the optimizer, timed as it installs them (forward_pre,
  // forward_post, step_pre, step_post); helpers: the Python it calls where
  // a reading is not native (memdiag/_lane.py: Helpers).
  Lane(py::dict hooks, py::object helpers, int device, py::dict config)
      : helpers_(std::move(helpers)), device_(device) {
    py_forward_pre_ = hooks["forward_pre"];
    py_forward_post_ = hooks["forward_post"];
    py_step_pre_ = hooks["step_pre"];
    py_step_post_ = hooks["step_post"];
    all_below_ = config["all_below"].cast<std::int64_t>();
    every_ = config["every"].cast<std::int64_t>();
    timed_all_below_ = config["timed_all_below"].cast<std::int64_t>();
    timed_every_ = config["timed_every"].cast<std::int64_t>();
    device_every_ = config["device_every"].cast<std::int64_t>();
    census_ = config["census"].cast<bool>();
    process_memory_ = config["process_memory"].cast<bool>();
    thread_ = config["thread"].cast<unsigned long>();
    profile_ = config.contains("profile") && config["profile"].cast<bool>();
  }

  // {part: (ns, calls)} since the lane was made (empty unless profiled).
  py::dict profile() const {
    py::dict out;
    if (!profile_) return out;
    for (int i = 0; i < kParts; ++i)
      if (part_calls_[i] > 0) out[kPartNames[i]] = py::make_tuple(part_ns_[i], part_calls_[i]);
    return out;
  }

  bool engaged() const { return engaged_; }

  // The recorder's state at a steady point (memdiag/_lane.py:
  // maybe_engage); params and holders: what its census counts.
  void adopt(py::tuple s, py::object params, py::object holders) {
    params_ = std::move(params);
    holders_ = std::move(holders);
    in_ = s[0].cast<int>();
    last_ = s[1].cast<int>();
    step_ = s[2].cast<std::int64_t>();
    recording_ = s[3].cast<bool>();
    timing_ = s[4].cast<bool>();
    phase_started_ = s[5].cast<double>();
    recount_gradients_ = s[6].cast<bool>();
    if (s[7].is_none()) {
      has_last_census_ = false;
    } else {
      has_last_census_ = true;
      py::tuple c = s[7];
      last_census_ = Census{c[0].cast<double>(), c[1].cast<double>(), c[2].cast<double>()};
    }
    state_entries_ = s[8].is_none() ? std::vector<std::int64_t>{} : s[8].cast<std::vector<std::int64_t>>();
    has_state_entries_ = !s[8].is_none();
    has_used_ = !s[9].is_none();
    used_ = has_used_ ? s[9].cast<std::int64_t>() : 0;
    has_used_reserved_ = !s[10].is_none();
    used_reserved_ = has_used_reserved_ ? s[10].cast<std::int64_t>() : 0;
    nvml_used_at_ = s[11];
    nvml_last_ = s[12];
    forward_inputs_ = s[13];
    micro_ = s[14].cast<std::int64_t>();
    losses_ = s[15].cast<std::vector<std::int64_t>>();
    depth_ = 0;
    in_step_call_ = 0;
    pending_loss_ = py::none();
    host_ns_ = 0;
    timed_later_ = 0;
    skipped_ = 0;
    counted_ = false;
    engaged_ = true;
  }

  // The state back, for the recorder's Python to go on from: the same
  // fields as adopt's, then what the lane counted meanwhile.
  py::tuple export_state() {
    engaged_ = false;
    py::object census = has_last_census_ ? py::object(py::make_tuple(last_census_.parameters, last_census_.gradients,
                                                                     last_census_.optimizer_state))
                                         : py::object(py::none());
    py::object entries = has_state_entries_ ? py::object(py::tuple(py::cast(state_entries_))) : py::object(py::none());
    py::object used = has_used_ ? py::object(py::int_(used_)) : py::object(py::none());
    py::object used_reserved = has_used_reserved_ ? py::object(py::int_(used_reserved_)) : py::object(py::none());
    py::tuple out = py::make_tuple(in_, last_, step_, recording_, timing_, phase_started_, recount_gradients_, census,
                                   entries, used, used_reserved, nvml_used_at_, nvml_last_, forward_inputs_, depth_,
                                   micro_, in_step_call_, pending_loss_, py::cast(losses_), host_ns_, timed_later_,
                                   skipped_, counted_);
    // The counts are handed over once; the rest is the same if asked again
    // (a spill a signal's handler interrupted, run again by finish()).
    host_ns_ = 0;
    timed_later_ = 0;
    skipped_ = 0;
    return out;
  }

  // The samples made since the last take, appended to the recorder's
  // `samples` as its _close makes them, and the loss slots kept in the
  // native buffer to its `kept`, in one native call: a signal's handler
  // (Python's run between bytecodes) cannot land between the lane's store
  // and the recorder's. names: the recorder's phase names by code; no_extra
  // and no_host: its _NO_EXTRA and _NO_HOST (compared by identity). A
  // census dict is shared by consecutive samples while no count moved, as
  // the recorder's census shares them.
  void take_into(py::list samples, py::list kept, py::dict names, py::object no_extra, py::object no_host) {
    for (Sample& s : samples_) {
      py::object census = py::none();
      if (s.has_census) {
        if (!census_dict_ || !(census_key_ == s.census)) {
          py::dict c;
          c["parameters_mib"] = s.census.parameters;
          c["gradients_mib"] = s.census.gradients;
          c["optimizer_state_mib"] = s.census.optimizer_state;
          census_dict_ = c;
          census_key_ = s.census;
        }
        census = census_dict_;
      }
      const Figures& f = s.figures;
      py::object extra = no_extra;
      if (s.extra == kForward) {
        extra = py::make_tuple(s.micro, s.inputs, py::none());
      } else if (s.extra == kBackward) {
        extra = py::make_tuple(s.micro, py::none(), py::none());
      } else if (s.extra == kStep) {
        extra = py::make_tuple(py::none(), py::none(), py::tuple(py::cast(s.losses)));
      }
      samples.append(py::make_tuple(
          names[py::int_(s.phase)], s.step,
          py::make_tuple(f.allocated / kMiB, f.reserved / kMiB, s.used / kMiB, f.peak / kMiB, f.inactive_split / kMiB,
                         s.process_mib, f.retries),
          s.elapsed_ms, extra, census, s.host.is_none() ? no_host : s.host));
    }
    samples_.clear();
    for (const std::int64_t slot : slots_) kept.append(slot);
    slots_.clear();
  }

  // The census dict the recorder holds as its last (None: none), for the
  // samples taken next to share while no count moves.
  void set_census_dict(py::object c) {
    census_dict_ = std::move(c);
    if (!census_dict_.is_none()) {
      census_key_ = Census{census_dict_["parameters_mib"].cast<double>(), census_dict_["gradients_mib"].cast<double>(),
                           census_dict_["optimizer_state_mib"].cast<double>()};
    } else {
      census_dict_ = py::object();
    }
  }
  py::object census_dict() const { return census_dict_ ? census_dict_ : py::object(py::none()); }

  // The step in progress, read without taking the state back (the
  // recorder's `step` property: another thread may read it mid-hook).
  std::int64_t step() const { return step_; }

  // Whether a GradScaler's step() just skipped the optimizer's (its hooks
  // never fired): the recorder's _after_scaler_step records the skip.
  bool scaler_skipped() const { return last_ == kBackward && in_ == kStep; }

  // ----- the model's and the optimizer's hooks ------------------------------

  py::object forward_pre(py::handle module, py::handle args, py::handle kwargs) {
    if (!engaged_) return py_forward_pre_(module, args, kwargs);
    if (PyThread_get_thread_ident() != thread_) return py::none();
    Timer timer(this);
    const Profiled part(this, kHookForwardPre);
    // What the recorder's _forward_pre does in another way: a nested call,
    // one under no_grad or in eval mode, a closure's inside step(), a
    // forward that is not a new step's (a micro-batch, a second forward).
    const bool canonical = depth_ == 0 && at::GradMode::is_enabled() && !(in_step_call_ && last_ == kBackward) &&
                           (last_ == kStep || (in_ == kBetween && last_ == kCleanup)) &&
                           is_training(module);
    if (!canonical) return spill_then(py_forward_pre_, module, args, kwargs, &timer);
    if (last_ == kStep) {
      close(kCleanup);
      in_ = kBetween;
    }
    count_forward();
    {
      const Profiled p(this, kPartResetPeak);
      reset_peak(device_);
    }  // _begin_phase: the time between steps (loading data) is no phase's
    phase_started_ = now_ms();
    in_ = kForward;
    counted_ = true;
    py::object inputs = none_pair();
    if (recording_) {
      const Profiled p(this, kPartSizes);
      inputs = sizes(args, kwargs);
    }
    if (!engaged_) return py::none();  // the recording ended meanwhile (a signal's handler ran in the walk)
    forward_inputs_ = std::move(inputs);
    ++depth_;
    return py::none();
  }

  py::object forward_post(py::handle module, py::handle args, py::handle output) {
    if (!engaged_) return py_forward_post_(module, args, output);
    if (PyThread_get_thread_ident() != thread_) return py::none();
    Timer timer(this);
    const Profiled part(this, kHookForwardPost);
    if (depth_ > 0) --depth_;
    return py::none();
  }

  py::object step_pre(py::handle optimizer, py::handle args, py::handle kwargs) {
    if (!engaged_) return py_step_pre_(optimizer, args, kwargs);
    if (PyThread_get_thread_ident() != thread_) return py::none();
    Timer timer(this);
    const Profiled part(this, kHookStepPre);
    ++in_step_call_;
    if (last_ == kBackward) in_ = kStep;
    return py::none();
  }

  py::object step_post(py::handle optimizer, py::handle args, py::handle kwargs) {
    if (!engaged_) return py_step_post_(optimizer, args, kwargs);
    if (PyThread_get_thread_ident() != thread_) return py::none();
    Timer timer(this);
    const Profiled part(this, kHookStepPost);
    if (last_ != kBackward) {
      // A second step() without a backward between: its memory is the
      // cleanup's, as the recorder reads it.
      in_step_call_ = in_step_call_ > 0 ? in_step_call_ - 1 : 0;
      return py::none();
    }
    in_step_call_ = in_step_call_ > 0 ? in_step_call_ - 1 : 0;
    close(kStep);
    in_ = kCleanup;
    return py::none();
  }

  // ----- backward and zero_grad(): called from the recorder's wrappers -----
  // Each returns whether it handled the call; false: the state is the
  // recorder's again and its Python handles it.

  bool before_backward(py::handle tensors) {
    if (!engaged_) return false;
    Timer timer(this);
    const Profiled part(this, kHookBeforeBackward);
    if (in_step_call_ && last_ == kBackward) return spill(&timer);  // a closure inside step()
    if (in_ != kForward) return spill(&timer);  // a forward the hooks did not see, a second backward
    close(kForward);
    in_ = kBackward;
    pending_loss_ = py::none();
    if (THPVariable_Check(tensors.ptr()) && THPVariable_Unpack(tensors.ptr()).numel() == 1)
      pending_loss_ = py::reinterpret_borrow<py::object>(tensors);
    return true;
  }

  bool after_backward() {
    if (!engaged_) return false;
    Timer timer(this);
    const Profiled part(this, kHookAfterBackward);
    if (in_ != kBackward || last_ != kForward) return true;  // the recorder's: nothing to do
    if (!pending_loss_.is_none() && recording_) {
      const Profiled p(this, kPartLoss);
      std::int64_t slot = -1;
      if (losses_buffer_ != nullptr) slot = losses_buffer_->add(pending_loss_);
      if (slot >= 0) {
        slots_.push_back(slot);
        losses_.push_back(kept_losses_++);
      } else {
        // Kept the recorder's way (LossBuffer.add), after the slots kept
        // here, so that its handles stay in order.
        flush_slots();
        losses_.push_back(helpers_.attr("add_loss")(pending_loss_).cast<std::int64_t>());
        kept_losses_ = losses_.back() + 1;
      }
    }
    pending_loss_ = py::none();
    close(kBackward);
    in_ = kStep;
    return true;
  }

  bool after_zero_grad() {
    if (!engaged_) return false;
    Timer timer(this);
    const Profiled part(this, kHookAfterZeroGrad);
    if (in_step_call_ && last_ == kBackward) return true;  // a closure's, evaluated again inside step()
    if (in_ == kForward || in_ == kBetween) recount_gradients_ = true;
    if (last_ == kBackward && in_ == kStep) return spill(&timer);  // step() skipped: the recorder's note
    if (last_ == kStep) {
      close(kCleanup);
      in_ = kBetween;
    } else if (last_ == kCleanup && in_ == kBetween) {
      // Another zero_grad() after the cleanup's (the recorder's says why);
      // a cleanup sample the recorder made before the lane engaged is its
      // Python's to make again.
      if (!close_again(kCleanup)) return spill(&timer);
    }
    return true;
  }

  // The loss buffer's native part (memdiag/_losses.py's LossBuffer._native)
  // and how many losses the buffer holds: slots kept here are its next.
  void set_losses(py::object buffer, std::int64_t kept) {
    losses_owner_ = buffer;
    losses_buffer_ = buffer.is_none() ? nullptr : buffer.cast<Losses*>();
    kept_losses_ = kept;
  }

 private:
  // Times a hook into the recorder's own host time, on the steps it times
  // (the recorder's _timed: the step's timing as the hook began).
  struct Timer {
    explicit Timer(Lane* lane) : lane_(lane), t0_(lane->timing_ ? now_ns() : 0), on_(lane->timing_) {}
    ~Timer() {
      if (on_ && lane_->engaged_) lane_->host_ns_ += now_ns() - t0_;
    }
    void stop() {
      if (on_) lane_->host_ns_ += now_ns() - t0_;
      on_ = false;
    }
    Lane* lane_;
    std::int64_t t0_;
    bool on_;
  };

  // Counts a part's time where the lane is profiled.
  struct Profiled {
    Profiled(Lane* lane, int part) : lane_(lane), part_(part), t0_(lane->profile_ ? now_ns() : 0) {}
    ~Profiled() {
      if (!lane_->profile_) return;
      lane_->part_ns_[part_] += now_ns() - t0_;
      ++lane_->part_calls_[part_];
    }
    Profiled(const Profiled&) = delete;
    Profiled& operator=(const Profiled&) = delete;
    Lane* lane_;
    int part_;
    std::int64_t t0_;
  };

  static py::object none_pair() { return py::make_tuple(py::none(), py::none()); }

  // module.training, the attribute's name made once.
  static bool is_training(py::handle module) {
    static PyObject* name = PyUnicode_InternFromString("training");
    PyObject* value = PyObject_GetAttr(module.ptr(), name);
    if (value == nullptr) throw py::error_already_set();
    const int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (truth < 0) throw py::error_already_set();
    return truth == 1;
  }

  // Hands the state back to the recorder (its _lane_spill takes it).
  bool spill(Timer* timer) {
    timer->stop();
    flush_slots();
    helpers_.attr("spill")();
    return false;
  }

  py::object spill_then(const py::object& hook, py::handle a, py::handle b, py::handle c, Timer* timer) {
    spill(timer);
    return hook(a, b, c);
  }

  void flush_slots() {
    if (slots_.empty()) return;
    helpers_.attr("keep_slots")(py::cast(slots_));
    slots_.clear();
  }

  bool is_timed(std::int64_t step) const {
    return step < timed_all_below_ || step % timed_every_ == (step / timed_every_) % timed_every_;
  }

  // The recorder's _count_forward for a new step.
  void count_forward() {
    ++step_;
    micro_ = 0;
    losses_.clear();
    const bool timing = is_timed(step_);
    timed_later_ += timing ? 1 : 0;  // the lane runs past _TIMED_ALL_BELOW only
    timing_ = timing;
    const bool recording = step_ < all_below_ || step_ % every_ == 0;
    if (recording && !recording_) has_last_census_ = false;  // steps ran unseen: count every role again
    if (!recording) ++skipped_;
    recording_ = recording;
  }

  // The recorder's _inputs.sizes for the common call (tensors or None,
  // positional then keywords); anything else is its walk, in Python.
  py::object sizes(py::handle args, py::handle kwargs) {
    const PyObject* a = args.ptr();
    const bool has_kwargs = !kwargs.is_none() && PyDict_Check(kwargs.ptr()) && PyDict_Size(kwargs.ptr()) > 0;
    const Py_ssize_t n_args = PyTuple_Check(a) ? PyTuple_GET_SIZE(a) : -1;
    if (n_args < 0) return helpers_.attr("sizes")(args, kwargs);
    const Py_ssize_t n_kwargs = has_kwargs ? PyDict_Size(kwargs.ptr()) : 0;
    if (n_args + n_kwargs > 64) return helpers_.attr("sizes")(args, kwargs);
    const at::Tensor* first = nullptr;
    const at::Tensor* bags = nullptr;
    // The integer tensors of two dimensions: (batch, length) each, as
    // _inputs._result reads them (a batch of each length among those of
    // the first's batch).
    std::vector<std::pair<std::int64_t, std::int64_t>> ids;
    bool walk = false;
    const auto integer = [](const at::Tensor& t) {
      return !(t.is_floating_point() || t.is_complex()) && t.scalar_type() != at::kBool;
    };
    auto visit = [&](PyObject* o) {
      if (walk) return;
      if (o == Py_None) return;
      if (!THPVariable_Check(o)) {
        walk = true;
        return;
      }
      const at::Tensor& t = THPVariable_Unpack(o);
      if (t.key_set().has(c10::DispatchKey::Python) || t.is_nested()) {
        walk = true;  // a subclass's or nested shape: Python's reading
        return;
      }
      if (t.dim() == 0) return;
      if (first == nullptr) {
        first = &t;
      } else if (bags == nullptr && first->dim() == 1 && t.dim() == 1 && integer(*first) && integer(t) &&
                 t.numel() > 0 && t.numel() < first->numel()) {
        bags = &t;  // _inputs._bags_of: the flat first's offsets or lengths
      }
      if (t.dim() == 2 && integer(t)) ids.emplace_back(t.size(0), t.size(1));
    };
    for (Py_ssize_t i = 0; i < n_args; ++i) visit(PyTuple_GET_ITEM(a, i));
    if (has_kwargs) {
      PyObject* key = nullptr;
      PyObject* value = nullptr;
      Py_ssize_t pos = 0;
      while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) visit(value);
    }
    if (walk) return helpers_.attr("sizes")(args, kwargs);
    if (first == nullptr) return none_pair();
    if (ids.empty() && bags != nullptr) return py::make_tuple(py::int_(bags->numel()), py::int_(first->numel()));
    const std::int64_t samples = first->size(0);
    py::object tokens = py::none();
    std::vector<std::int64_t> lengths;
    for (const auto& [batch, length] : ids) {
      if (batch == samples && std::find(lengths.begin(), lengths.end(), length) == lengths.end()) {
        lengths.push_back(length);
      }
    }
    std::int64_t total = 0;
    for (const std::int64_t l : lengths) total += samples * l;
    if (total > 0) tokens = py::int_(total);
    return py::make_tuple(samples > 0 ? py::object(py::int_(samples)) : py::object(py::none()), tokens);
  }

  // The recorder's _optimizer_state_entries.
  std::vector<std::int64_t> state_entries() const {
    std::vector<std::int64_t> out;
    for (const py::handle h : holders_) {
      py::object state = h.attr("state");
      const Py_ssize_t n = PyObject_Length(state.ptr());
      if (n < 0) throw py::error_already_set();  // as len(state) raises in the recorder's Python
      out.push_back(n);
      // The keys of the first parameter's state, as the recorder's Python
      // counts them (a buffer added to every parameter's later).
      {
        std::int64_t keys = -1;
        if (PyDict_Check(state.ptr())) {
          PyObject* key = nullptr;
          PyObject* value = nullptr;
          Py_ssize_t pos = 0;
          if (PyDict_Next(state.ptr(), &pos, &key, &value) && PyDict_Check(value)) keys = PyDict_Size(value);
        }
        out.push_back(keys);
      }
      {
        // Which parameters hold it (the recorder's Python: the XOR of
        // their id()s): a weight replaced, its state popped and the new
        // one's made, changes no count.
        std::int64_t ids = 0;
        if (PyDict_Check(state.ptr())) {
          PyObject* key = nullptr;
          PyObject* value = nullptr;
          Py_ssize_t pos = 0;
          while (PyDict_Next(state.ptr(), &pos, &key, &value)) ids ^= static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(key));
        }
        out.push_back(ids);
      }
      if (n <= 4) {
        std::int64_t lists = 0;
        PyObject* values = PyObject_CallMethod(state.ptr(), "values", nullptr);
        if (values == nullptr) throw py::error_already_set();
        for (const py::handle st : py::reinterpret_steal<py::object>(values)) {
          if (!PyDict_Check(st.ptr())) continue;
          PyObject* key = nullptr;
          PyObject* value = nullptr;
          Py_ssize_t pos = 0;
          while (PyDict_Next(st.ptr(), &pos, &key, &value))
            if (PyList_Check(value) || PyTuple_Check(value)) lists += PyObject_Length(value);  // never fails for these
        }
        out.push_back(lists);
      }
    }
    return out;
  }

  double gradients_mib() {
    std::int64_t n = -1;
    try {
      n = gradient_bytes(py::reinterpret_borrow<py::sequence>(params_), 1);
    } catch (const std::exception&) {
      n = -1;  // the count in Python, whatever the native one met (as _census.gradients_mib)
    }
    if (n >= 0) return static_cast<double>(n) / kMiB;
    return helpers_.attr("gradients_mib")().cast<double>();
  }

  // The recorder's _take_census(phase) for the lane's phases.
  Census take_census(int phase) {
    Census c{};
    if (!has_last_census_) {
      state_entries_ = state_entries();
      has_state_entries_ = true;
      c = Census{helpers_.attr("parameters_mib")().cast<double>(), gradients_mib(),
                 helpers_.attr("optimizer_state_mib")().cast<double>()};
    } else if (phase == kBackward || phase == kCleanup || (phase == kForward && recount_gradients_)) {
      recount_gradients_ = false;
      const double gradients = gradients_mib();
      c = last_census_;
      c.gradients = gradients;
    } else if (phase == kStep) {
      std::vector<std::int64_t> entries = state_entries();
      c = last_census_;
      if (!has_state_entries_ || entries != state_entries_) {
        // Parameters with state came or went: a param group added in the
        // loop brings weights the census must count as weights.
        py::object fresh = helpers_.attr("refresh_parameters")();
        if (!fresh.is_none()) {
          params_ = fresh;
          c.parameters = helpers_.attr("parameters_mib")().cast<double>();
          c.gradients = gradients_mib();
        }
        c.optimizer_state = helpers_.attr("optimizer_state_mib")().cast<double>();
        state_entries_ = std::move(entries);
        has_state_entries_ = true;
      }
    } else {
      c = last_census_;
    }
    last_census_ = c;
    has_last_census_ = true;
    return c;
  }

  // The recorder's _close_again(phase): the last sample, if it is this
  // step's `phase`, made again from its start to now, the higher peak kept.
  // False where the sample to make again is not the lane's.
  bool close_again(int phase) {
    if (!recording_) return true;  // nothing sampled: the recorder's does nothing either
    if (samples_.empty() || samples_.back().phase != phase || samples_.back().step != step_) return false;
    Sample last = std::move(samples_.back());
    samples_.pop_back();
    close(phase);
    if (samples_.empty() || samples_.back().phase != phase) return true;  // the recording ended meanwhile
    Sample& s = samples_.back();
    s.figures.peak = std::max(s.figures.peak, last.figures.peak);
    s.elapsed_ms += last.elapsed_ms;
    return true;
  }

  // The recorder's _close(phase) for a step's phase.
  void close(int phase) {
    last_ = phase;
    const bool cleanup = phase == kCleanup;
    double now = -1.0;
    if (recording_) {
      const bool ask = cleanup && step_ % device_every_ == 0;
      Sample s{};
      s.phase = phase;
      s.step = step_;
      // CudaProbe.figures, native branch: the device's use where asked or
      // where the reserve moved since it was last asked.
      {
        const Profiled p(this, kPartFigures);
        s.figures = figures(device_, true, ask || !has_used_);
      }
      if (s.figures.used >= 0) {
        used_ = s.figures.used;
        has_used_ = true;
        used_reserved_ = s.figures.reserved;
        has_used_reserved_ = true;
      } else if (!has_used_reserved_) {
        const Profiled p(this, kPartDeviceUsed);
        const std::int64_t used = device_used(device_);
        used_ = used;
        has_used_ = true;
        used_reserved_ = s.figures.reserved;
        has_used_reserved_ = true;
      } else if (s.figures.reserved != used_reserved_) {
        // Moved by as much as the reserve (CudaProbe.figures says why).
        used_ += s.figures.reserved - used_reserved_;
        used_reserved_ = s.figures.reserved;
      }
      s.used = used_;
      s.process_mib = py::none();
      if (process_memory_) {
        // NVML where the device's use moved since it was last asked (the
        // probe's _nvml_used_at: None or an int), compared without a
        // Python object a phase, and then only where the device's use is
        // asked for (every tenth step's end): moved elsewhere, the figure
        // is None, not read (CudaProbe.figures says why).
        const bool never = nvml_used_at_.is_none();
        const bool same = !never && PyLong_Check(nvml_used_at_.ptr()) &&
                          PyLong_AsLongLong(nvml_used_at_.ptr()) == used_;
        if (same) {
          s.process_mib = nvml_last_;
        } else if (ask || never) {
          const Profiled p(this, kPartProcess);
          nvml_last_ = helpers_.attr("process_mib")();
          nvml_used_at_ = py::int_(used_);
          s.process_mib = nvml_last_;
        }
      }
      if (ask) {
        const Profiled p(this, kPartHost);
        s.host = helpers_.attr("host")();
      } else {
        s.host = py::none();  // not read
      }
      now = now_ms();
      s.elapsed_ms = now - phase_started_;
      // What the recorder's _close adds: a forward's micro-batch and inputs,
      // a backward's micro-batch, a step's losses.
      s.extra = phase == kForward || phase == kBackward || (phase == kStep && !losses_.empty()) ? phase : 0;
      s.micro = micro_;
      s.inputs = phase == kForward ? forward_inputs_ : py::none();
      if (s.extra == kStep) s.losses = losses_;
      s.has_census = census_;
      if (census_) {
        const Profiled p(this, kPartCensus);
        s.census = take_census(phase);
      }
      // The recording ended meanwhile (a signal's handler ran in one of the
      // Python readings above and finished it): its report is written.
      if (!engaged_) return;
      const Profiled p(this, kPartSample);
      samples_.push_back(std::move(s));
    } else {
      const Profiled p(this, kPartResetPeak);
      reset_peak(device_);  // the recorder's begin_phase where it read nothing
    }
    // The next phase starts now: read again where the census's work
    // followed the reading, or at a cleanup (as the recorder reads it).
    phase_started_ = (now >= 0.0 && !cleanup && !census_) ? now : now_ms();
  }

  py::object helpers_;  // memdiag/_lane.py's Helpers: a weak reference to the recorder
  int device_;
  py::object py_forward_pre_, py_forward_post_, py_step_pre_, py_step_post_;
  std::int64_t all_below_ = 0, every_ = 1, timed_all_below_ = 10, timed_every_ = 10, device_every_ = 10;
  bool census_ = false, process_memory_ = false, profile_ = false;
  std::int64_t part_ns_[kParts] = {};
  std::int64_t part_calls_[kParts] = {};
  unsigned long thread_ = 0;
  py::object params_, holders_;
  py::object losses_owner_;
  Losses* losses_buffer_ = nullptr;
  std::int64_t kept_losses_ = 0;

  bool engaged_ = false;
  int in_ = kNone, last_ = kNone;
  std::int64_t step_ = -1, micro_ = 0, in_step_call_ = 0, depth_ = 0;
  bool recording_ = true, timing_ = true, recount_gradients_ = false, counted_ = false;
  double phase_started_ = 0.0;
  bool has_last_census_ = false;
  Census last_census_{};
  bool has_state_entries_ = false;
  std::vector<std::int64_t> state_entries_;
  bool has_used_ = false, has_used_reserved_ = false;
  std::int64_t used_ = 0, used_reserved_ = 0;
  py::object nvml_used_at_ = py::none(), nvml_last_ = py::none();
  py::object forward_inputs_ = py::none();
  py::object pending_loss_ = py::none();
  std::vector<std::int64_t> losses_;
  std::vector<std::int64_t> slots_;
  std::vector<Sample> samples_;
  py::object census_dict_;  // the last census dict taken (or adopted), shared while no count moves
  Census census_key_{};
  std::int64_t host_ns_ = 0, timed_later_ = 0, skipped_ = 0;
};

}  // namespace
}  // namespace memdiag_native

void define_lane(py::module_& m) {
  using memdiag_native::Lane;
  py::class_<Lane>(m, "Lane")
      .def(py::init<py::dict, py::object, int, py::dict>())
      .def_property_readonly("engaged", &Lane::engaged)
      .def("adopt", &Lane::adopt)
      .def("export", &Lane::export_state)
      .def("take_into", &Lane::take_into)
      .def("set_census_dict", &Lane::set_census_dict)
      .def_property_readonly("census_dict", &Lane::census_dict)
      .def_property_readonly("step", &Lane::step)
      .def("scaler_skipped", &Lane::scaler_skipped)
      .def("profile", &Lane::profile)
      .def("set_losses", &Lane::set_losses)
      .def("forward_pre", &Lane::forward_pre)
      .def("forward_post", &Lane::forward_post)
      .def("step_pre", &Lane::step_pre)
      .def("step_post", &Lane::step_post)
      .def("before_backward", &Lane::before_backward)
      .def("after_backward", &Lane::after_backward)
      .def("after_zero_grad", &Lane::after_zero_grad);
  m.def("_test_fake_readings", [](bool on) {
    memdiag_native::fake_readings() = memdiag_native::FakeReadings{};
    memdiag_native::fake_readings().on = on;
  });
  m.def("device_used", &memdiag_native::device_used, py::arg("device"));
}
