// The training loop behind `lms train` (see trainer.h).
#include "lms/runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "lms/runtime/backend_registry.h"
#include "lms/runtime/evaluate.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"
#include "lms/sim/time_sim.h"

namespace lms {

namespace {

// The graph inputs a data source feeds, by the names model builders give them.
constexpr const char* kInputName = "x";
constexpr const char* kLabelsName = "labels";

Result<ValueId> named_input(const Graph& g, const char* name) {
  auto v = g.find_value(name);
  if (!v || g.node(g.value(*v).producer).op != Op::input)
    return fail("training feeds inputs %{} and %{}, but graph '{}' has no input %{}", kInputName, kLabelsName,
                g.name(), name);
  return *v;
}

// The backend the options ask for: the budget enforced by its arena, cuda's TF32, workspace limit and 1x1
// convolutions, and cpu's layouts as asked.
BackendOptions backend_options(const TrainOptions& opts) {
  return BackendOptions{.device_budget_bytes = opts.budget_bytes,
                        .max_workspace_bytes = opts.max_workspace_bytes,
                        .allow_tf32 = opts.allow_tf32,
                        .conv_gemm = opts.conv_gemm,
                        .cpu_blocked_layouts = opts.cpu_blocked_layouts};
}

// The evaluation program: the evaluation graph (the forward graph up to the logits, batch norm with the running
// statistics training keeps) under the training budget, planned with `backend`'s workspaces. Made before training
// starts, so that one that cannot run is an error then, not after the training.
Result<Program> evaluation_program(const Graph& forward, const TrainOptions& opts, Backend& backend) {
  Graph eval = LMS_TRY(evaluation_graph(forward, opts.training.bn_running_stats));
  auto program = compile(eval, PlanOptions{.budget_bytes = opts.budget_bytes}, &backend);
  if (!program) return wrap("evaluation (--data with a test split)", program.error());
  ValueId x = LMS_TRY(named_input(program->graph(), kInputName));
  for (ValueId v : program->inputs())
    if (v != x) return fail("evaluation: the logits depend on input %{}, which the data does not provide",
                            program->graph().value(v).name);
  return program;
}

// Accuracy of `values` on the test split: the evaluation program on a backend of its own, made after the training
// arenas are released.
Result<std::pair<double, int64_t>> evaluate(const Program& program, const TrainOptions& opts, DataSource& data,
                                            const std::map<std::string, HostTensor>& values) {
  std::unique_ptr<Backend> backend = LMS_TRY(make_backend(opts.device, backend_options(opts)));
  const ValueId x = program.inputs().front();
  Executor ex = LMS_TRY(Executor::create(program, *backend));
  LMS_TRY_VOID(ex.load(values, /*allow_unused=*/true));
  HostTensor xs, labels;
  int64_t correct = 0, total = 0;
  for (int64_t i = 0; i < data.test_batches(); ++i) {
    int64_t rows = LMS_TRY(data.test_batch(i, xs, labels));
    Feed feed{x, &xs};
    StepResult r = LMS_TRY(ex.step({&feed, 1}));
    correct += LMS_TRY(count_correct(r.outputs.front(), labels, rows));
    total += rows * (labels.type.shape[0] == 0 ? 0 : labels.type.num_elements() / labels.type.shape[0]);
  }
  if (total == 0) return fail("evaluation: the test split is empty");
  return std::pair{static_cast<double>(correct) / static_cast<double>(total), data.test_size()};
}

// The training runtime: the backend with its arenas, the executor on them, and the batch buffers pinned for the
// backend. Made once, and again after each evaluation during training, which needs the device for its own program.
struct TrainingRuntime {
  const Program& program;
  std::unique_ptr<Backend> backend;
  std::optional<Executor> ex;
  std::vector<void*> pinned;  // host buffers pinned with `backend`
  bool pin_tried = false;

  TrainingRuntime(const Program& p, std::unique_ptr<Backend> b) : program(p), backend(std::move(b)) {}
  TrainingRuntime(const TrainingRuntime&) = delete;
  TrainingRuntime& operator=(const TrainingRuntime&) = delete;
  ~TrainingRuntime() { release(); }

  // The executor on `backend`'s fresh arenas, holding `values` (a checkpoint's, or those of before an evaluation),
  // or the initial values.
  Result<void> start(const TrainOptions& opts, const std::map<std::string, HostTensor>* values) {
    ex.emplace(LMS_TRY(Executor::create(program, *backend, ExecutorOptions{opts.validate})));
    if (values) return ex->load(*values);
    return ex->initialize(opts.seed, opts.given_values);
  }
  // Pins the batch buffers (reused every step; DataSource keeps their storage), so that writing them into the arena
  // is one DMA each (cuda; other backends pin nothing); a buffer that cannot be pinned is copied from pageable
  // memory. Returns whether all were pinned.
  bool pin(std::initializer_list<HostTensor*> batch) {
    pin_tried = true;
    for (HostTensor* t : batch) {
      auto ok = backend->pin_host_memory(t->data.data(), static_cast<int64_t>(t->data.size()));
      if (ok && *ok) pinned.push_back(t->data.data());
    }
    return pinned.size() == batch.size();
  }
  // Unpins, and frees the executor, the arenas and the backend.
  void release() {
    ex.reset();
    if (backend)
      for (void* p : pinned) backend->unpin_host_memory(p);
    pinned.clear();
    pin_tried = false;
    backend.reset();
  }
};

}  // namespace

Result<CheckpointRecord> take_checkpoint_record(std::map<std::string, HostTensor>& values, const std::string& where) {
  auto take = [&](const char* key, const char* what) -> Result<std::optional<int64_t>> {
    auto it = values.find(key);
    if (it == values.end()) return std::optional<int64_t>{};
    const HostTensor& t = it->second;
    if (t.type != TensorType{DType::i64, {}} || t.as<int64_t>()[0] < 0)
      return fail_at(where, "member '{}' must be a non-negative i64 scalar ({}), got {}", key, what,
                     t.type == TensorType{DType::i64, {}} ? std::to_string(t.as<int64_t>()[0]) : to_string(t.type));
    const int64_t v = t.as<int64_t>()[0];
    values.erase(it);
    return std::optional<int64_t>{v};
  };
  CheckpointRecord r;
  r.steps = LMS_TRY(take(kCheckpointStepsKey, "the steps trained")).value_or(0);
  r.batch = LMS_TRY(take(kCheckpointBatchKey, "the batch"));
  r.seed = LMS_TRY(take(kCheckpointSeedKey, "the seed of the data order"));
  return r;
}

void put_checkpoint_record(std::map<std::string, HostTensor>& values, const CheckpointRecord& record) {
  auto put = [&](const char* key, int64_t v) {
    HostTensor t({DType::i64, {}});
    t.as<int64_t>()[0] = v;
    values.insert_or_assign(key, std::move(t));
  };
  put(kCheckpointStepsKey, record.steps);
  if (record.batch) put(kCheckpointBatchKey, *record.batch);
  if (record.seed) put(kCheckpointSeedKey, *record.seed);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

Result<TrainReport> train(const Graph& forward, const TrainOptions& opts, const ProgressCallback& progress) {
  if (opts.steps && opts.epochs) return fail("give --steps or --epochs, not both");
  if (opts.steps && *opts.steps < 1) return fail("--steps must be >= 1, got {}", *opts.steps);
  if (opts.epochs && *opts.epochs < 1) return fail("--epochs must be >= 1, got {}", *opts.epochs);
  LMS_TRY_VOID(check_optimizer_options(opts.training.optimizer));
  const double lr = effective_lr(opts.training.optimizer);
  LMS_TRY_VOID(check_lr_schedule(opts.lr_schedule, lr));
  TrainingOptions training_opts = opts.training;
  training_opts.optimizer.lr_scale = is_scheduled(opts.lr_schedule);
  if (opts.first_step < 0) return fail("the steps already trained must be >= 0, got {}", opts.first_step);
  if (opts.checkpoint_every < 0) return fail("--save-every must be >= 1, got {}", opts.checkpoint_every);
  if (opts.evaluate_every < 0) return fail("--eval-every must be >= 1 epochs, got {}", opts.evaluate_every);
  LMS_TRY_VOID(check_backend_dtypes(forward));

  // Everything is decided, and a plan that does not fit is refused, before any memory is touched.
  const auto planning_start = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  Graph training = LMS_TRY(build_training_graph(forward, training_opts));
  // The data are opened, and a file checked, before planning, which can take minutes on a large model.
  DataOptions data_opts = opts.data;
  data_opts.seed = opts.seed;
  if (auto logits = logits_of(forward); logits && forward.value(*logits).type.rank() >= 2)
    data_opts.classes = forward.value(*logits).type.shape[1];  // labels (and token ids) must be valid classes
  std::unique_ptr<DataSource> data =
      LMS_TRY(open_data(data_opts, training.value(LMS_TRY(named_input(training, kInputName))).type,
                        training.value(LMS_TRY(named_input(training, kLabelsName))).type));
  // The backend is made first because the plan includes its kernels' workspaces; its arenas are allocated
  // only once the plan is known to fit.
  std::unique_ptr<Backend> backend = LMS_TRY(make_backend(opts.device, backend_options(opts)));
  StrategyOptions planning;
  planning.strategy = opts.strategy;
  planning.budget_bytes = opts.budget_bytes;
  planning.host_budget_bytes = opts.host_budget_bytes;
  planning.workspace_bytes = workspaces_of(*backend);
  planning.tflms_fixed = opts.tflms;
  planning.on_trial = opts.on_trial;
  planning.device_model = opts.device_model;
  planning.measured = opts.measured;
  planning.reuse_buffers = opts.reuse_buffers;
  Plan plan = LMS_TRY(make_plan(training, planning));
  TrainReport rep;
  rep.plan_seconds = seconds_since(planning_start);
  rep.peak_bytes_none = plan.peak_bytes_none;
  rep.lms_needed = plan.lms_needed;
  rep.tflms = plan.tflms;
  rep.swap_out_bytes = plan.swap_out_bytes;
  rep.swap_in_bytes = plan.swap_in_bytes;
  rep.swapped_tensors = plan.swapped_tensors;
  rep.recomputed_tensors = plan.recomputed_tensors;
  rep.recompute_flops = plan.recompute_flops;
  rep.auto_source = plan.auto_source;
  rep.predicted_step_seconds = plan.predicted_step_seconds;
  if (opts.device_model && !rep.predicted_step_seconds)
    rep.predicted_step_seconds =
        LMS_TRY(simulate_time(plan.graph, *opts.device_model, opts.measured.empty() ? nullptr : &opts.measured,
                              &plan.memory))
            .step_seconds;
  if (opts.device_model) rep.device_model = opts.device_model->name;
  Program program = LMS_TRY(build_program(std::move(plan.graph), std::move(plan.memory)));
  const Graph& g = program.graph();
  ValueId x = LMS_TRY(named_input(g, kInputName));
  ValueId labels = LMS_TRY(named_input(g, kLabelsName));
  const ValueId lr_scale = training_opts.optimizer.lr_scale ? *g.find_value(kLrScaleName) : ValueId{};
  for (ValueId v : program.inputs())
    if (v != x && v != labels && v != lr_scale)
      return fail("training feeds inputs %{} and %{}, but graph '{}' also has input %{}", kInputName, kLabelsName,
                  g.name(), g.value(v).name);

  if (opts.evaluate && opts.evaluate_every > 0 && data->test_size() == 0)
    return fail("--eval-every: the data have no test split (an .npz needs x_test and y_test)");
  std::optional<Program> eval_program;
  if (opts.evaluate && data->test_size() > 0)
    eval_program.emplace(LMS_TRY(evaluation_program(forward, opts, *backend)));
  rep.batch = data->batch_size();
  rep.steps_per_epoch = data->train_batches();
  const int64_t total = opts.steps ? *opts.steps : opts.epochs.value_or(1) * rep.steps_per_epoch;
  rep.first_step = opts.first_step;
  // Epochs are counted from the first step ever trained, so that a resumed run goes on where its checkpoint was.
  const int64_t total_epochs = (opts.first_step + total + rep.steps_per_epoch - 1) / rep.steps_per_epoch;
  rep.planned_steps = total;
  rep.lr_scheduled = lr_scale.valid();
  const MemoryPlan& memory = program.memory();
  rep.planned_peak_bytes = memory.device_arena_bytes;
  rep.budget_bytes = opts.budget_bytes;
  rep.lower_bound_bytes = memory.lower_bound_bytes;
  rep.min_budget_bytes = memory.min_budget_bytes;
  rep.persistent_bytes = memory.persistent_bytes;
  // Bad input is refused before anything is printed or allocated.
  if (opts.initial_values) LMS_TRY_VOID(check_checkpoint(program, *opts.initial_values));
  if (opts.resumed && opts.on_warning) {
    auto differs = [&](const char* what, const std::optional<int64_t>& was, int64_t now) {
      if (was && *was != now)
        opts.on_warning(fmt::format("the checkpoint was trained with {} {}, this run has {} {}: the data order does "
                                    "not go on where it stopped", what, *was, what, now));
    };
    differs("batch", opts.resumed->batch, rep.batch);
    if (opts.seed <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      differs("seed", opts.resumed->seed, static_cast<int64_t>(opts.seed));
  }
  if (opts.on_start_up) {
    const std::string source = data->kind() == "npz" ? "npz " + opts.data.file : std::string(data->kind());
    const std::string resuming =
        opts.first_step > 0 ? fmt::format("; resuming after step {}", opts.first_step) : std::string();
    opts.on_start_up(fmt::format("data: {}: {} train samples ({} steps an epoch at batch {}{}), {} test", source,
                                 data->train_size(), rep.steps_per_epoch, rep.batch, resuming, data->test_size()));
    std::string line = fmt::format("planned in {:.2f} s: peak {} ({})", rep.plan_seconds,
                                   format_size(memory.device_arena_bytes),
                                   opts.budget_bytes == kUnlimitedBytes ? std::string("no budget")
                                                                        : "budget " + format_size(opts.budget_bytes));
    if (rep.swapped_tensors > 0 || rep.recomputed_tensors > 0)
      line += fmt::format("; {} tensors swapped ({} out, {} in per step), {} recomputed", rep.swapped_tensors,
                          format_size(rep.swap_out_bytes), format_size(rep.swap_in_bytes), rep.recomputed_tensors);
    opts.on_start_up(line);
  }

  std::map<std::string, HostTensor> trained;
  {
    // The training backend and its arenas live only for the training loop (and are released for each evaluation
    // during it: TrainingRuntime).
    const auto start_up = std::chrono::steady_clock::now();
    if (opts.on_start_up)
      opts.on_start_up(fmt::format("allocating the {} device arena{}, then {} the parameters",
                                   format_size(memory.device_arena_bytes),
                                   memory.host_arena_bytes > 0
                                       ? " and the " + format_size(memory.host_arena_bytes) + " host arena"
                                       : std::string(),
                                   opts.initial_values ? "loading" : "initializing"));
    std::vector<double> feed_seconds;
    HostTensor xs, ls, scale({DType::f32, {}});
    TrainingRuntime rt{program, std::move(backend)};  // after the batch buffers: unpins them before they are freed
    LMS_TRY_VOID(rt.start(opts, opts.initial_values));
    rep.start_seconds = seconds_since(start_up);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < total; ++step) {
      // The data order goes on from the steps a resumed checkpoint was trained for.
      const int64_t trained = opts.first_step + step;
      const int64_t epoch = trained / rep.steps_per_epoch;
      LMS_TRY_VOID(data->train_batch(epoch, trained % rep.steps_per_epoch, xs, ls));
      if (!rt.pin_tried) rep.batch_pinned = rt.pin({&xs, &ls});
      Executor& ex = *rt.ex;
      // The rate's ratio to lr, rounded to the f32 the updates read; the rate reported is the one they use.
      const double rate = lr_at(opts.lr_schedule, lr, trained, opts.first_step + total);
      const auto ratio = static_cast<float>(lr > 0 ? rate / lr : 1);
      scale.as<float>()[0] = ratio;
      rep.learning_rates.push_back(lr * static_cast<double>(ratio));
      const Feed feeds[] = {{x, &xs}, {labels, &ls}, {lr_scale, &scale}};
      TraceWriter* trace = opts.trace != nullptr && traced_step(step, total) ? opts.trace : nullptr;
      if (trace) trace->set_step(step);
      StepResult r = LMS_TRY(ex.step(std::span(feeds, lr_scale.valid() ? 3 : 2), trace));
      rep.losses.push_back(r.outputs.front().get(0));
      if (opts.training.clip_grad_norm > 0) rep.grad_norms.push_back(r.outputs.at(1).get(0));
      rep.step_seconds.push_back(r.seconds);
      feed_seconds.push_back(r.feed_seconds);
      rep.peak_device_bytes = std::max(rep.peak_device_bytes, r.touched_bytes);
      rep.max_live_bytes = std::max(rep.max_live_bytes, r.max_live_bytes);
      rep.steps = step + 1;
      if (progress) {
        StepProgress p{step + 1, total, epoch, total_epochs, rep.batch, rep.losses.back(), rep.learning_rates.back(),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
        if (!progress(p)) {
          rep.interrupted = rep.steps < total;
          break;
        }
      }
      // A checkpoint every `checkpoint_every` steps, but not after the last (the caller saves the final values).
      if (opts.on_checkpoint && opts.checkpoint_every > 0 && rep.steps % opts.checkpoint_every == 0 &&
          rep.steps < total)
        LMS_TRY_VOID(opts.on_checkpoint(LMS_TRY(ex.persistent_values()), opts.first_step + rep.steps));
      // An evaluation after every `evaluate_every` epochs but the end of the run (evaluated below): the training
      // arenas are released for it and remade from the values, which go on bit for bit.
      const bool epoch_end = (trained + 1) % rep.steps_per_epoch == 0;
      if (opts.evaluate && opts.evaluate_every > 0 && epoch_end && (epoch + 1) % opts.evaluate_every == 0 &&
          rep.steps < total && data->test_size() > 0) {
        std::map<std::string, HostTensor> values = LMS_TRY(ex.persistent_values());
        rt.release();
        auto [accuracy, samples] = LMS_TRY(evaluate(*eval_program, opts, *data, values));
        rep.evaluations.push_back({epoch + 1, trained + 1, accuracy});
        if (opts.on_evaluation) opts.on_evaluation(rep.evaluations.back(), samples);
        rt.backend = LMS_TRY(make_backend(opts.device, backend_options(opts)));
        LMS_TRY_VOID(rt.start(opts, &values));
      }
    }
    if (opts.keep_values || opts.evaluate) trained = LMS_TRY(rt.ex->persistent_values());
    rep.feed_seconds_median = median(feed_seconds);
  }  // the training arenas are released before evaluation allocates its own

  rep.step_seconds_median = median(rep.step_seconds);
  double sum = 0;
  for (double s : rep.step_seconds) sum += s;
  rep.samples_per_second = sum > 0 ? static_cast<double>(rep.batch * rep.steps) / sum : 0;
  if (opts.evaluate && !rep.interrupted && data->test_size() > 0) {
    auto [accuracy, samples] = LMS_TRY(evaluate(*eval_program, opts, *data, trained));
    rep.test_accuracy = accuracy;
    rep.test_samples = samples;
    const int64_t end = opts.first_step + rep.steps;
    rep.evaluations.push_back({(end + rep.steps_per_epoch - 1) / rep.steps_per_epoch, end, accuracy});
  }
  if (opts.keep_values) rep.values = std::move(trained);
  return rep;
}

}  // namespace lms
