// The checks of nccl_ranks_app beyond the gradient buckets: a simulated
// group, a compressor switched at run time, non-blocking communicators,
// communicators made in other ways, per-call configs, and int8's bytes.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/element_rules.h"
#include "tests/hostsim/nccl_ranks_job.h"

namespace ranks_job {

// ncclGroupSimulateEnd runs nothing: no buffer changes, nothing is counted.
void check_simulated_group(Comm& world, float* send, float* recv, cudaStream_t stream) {
  const std::size_t n = 100000;
  const std::vector<float> before = sim::values_for(next_call++, world.rank, n, ncclFloat32);
  CUDA_OK(cudaMemcpyAsync(send, before.data(), n * 4, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaMemcpyAsync(recv, before.data(), n * 4, cudaMemcpyHostToDevice, stream));
  const slimreduce_counters counted_before = counters_now();
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream));  // eligible
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclMax, world.nccl, stream));  // passed
  NCCL_OK(ncclGroupSimulateEnd(&info));
  const slimreduce_counters counted_after = counters_now();
  std::vector<float> got(n);
  CUDA_OK(cudaMemcpyAsync(got.data(), recv, n * 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const bool untouched = std::memcmp(got.data(), before.data(), n * 4) == 0;
  const bool uncounted = counted_after.intercepted == counted_before.intercepted;
  expect(untouched, "a simulated group runs nothing");
  expect(uncounted, "a simulated group counts nothing");
}

// Two communicators of the same ranks in one group, their calls issued in
// opposite orders on odd and even ranks. NCCL launches a group's calls
// together, so this is a valid job; whatever SlimReduce runs after the
// group ends must not turn the order into a wait on another rank (which
// would hang: each rank's first collective waiting for the other's).
// PowerSGD, the quantizers and sharded top-k run collectives after the group
// ends, outside any group: they must take their steps in one order on every
// rank (communicator by communicator, core/nccl/plan.cc), or this hangs.
// Under a residual cap (SLIMREDUCE_EF_MAX_BYTES) each rank gives the room to
// the keys in its own call order, which the model, one order for all ranks,
// does not follow: not checked there.
void check_opposite_orders(Comm& world, float* const send[2], float* const recv[2], std::size_t n,
                           cudaStream_t stream) {
  if (std::getenv("SLIMREDUCE_EF_MAX_BYTES")) {
    if (world.rank == 0)
      std::printf("not checked: opposite orders in one group (the model gives capped residual "
                  "room in one order)\n");
    return;
  }
  Comm twin = split_comm(world, 0);
  for (int step = 0; step < 2; ++step) {
    Call a = prepare(world, send[0], recv[0], n, ncclFloat32, ncclSum, stream);
    Call b = prepare(twin, send[1], recv[1], n + 1000, ncclFloat32, ncclSum, stream);
    NCCL_OK(ncclGroupStart());
    if (world.rank % 2 == 0) {
      issue(a);
      issue(b);
    } else {
      issue(b);
      issue(a);
    }
    NCCL_OK(ncclGroupEnd());
    verify("opposite orders in one group: the world's call", a);
    verify("opposite orders in one group: its twin's call", b);
  }
  NCCL_OK(ncclCommDestroy(twin.nccl));
  model.forget(twin.id);
}

// An inf in one rank's input, then a call on the same key without one. A
// plain sum, a cast or top-k keeps the inf where it was; PowerSGD's summed P
// is then not finite: NaN everywhere, its residual zeroed and Q kept, so the
// next call comes out as the model's.
void check_not_finite(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream) {
  for (int step = 0; step < 2; ++step) {
    Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
    if (step == 0) {
      c.model.inputs[0][5] = INFINITY;
      const float inf = INFINITY;
      if (world.rank == 0)
        CUDA_OK(cudaMemcpyAsync(send + 5, &inf, sizeof inf, cudaMemcpyHostToDevice, stream));
      CUDA_OK(cudaStreamSynchronize(stream));  // before `inf` goes
    }
    issue(c);
    verify(step == 0 ? "an inf in rank 0's input" : "the same key after an inf", c);
  }
}

// A 16-bit cast whose sum leaves fp16's range: on NCCL it comes out inf, as
// NCCL's own fp16 sum gives (docs/architecture.md, "Casts": the MPI paths
// rerun such a call in bf16 once every rank has seen the same inf in the
// reduced wire, but on NCCL that sum happens on the stream, after the host
// has let go of the call: no rank could decide a rerun without waiting for
// the device). Pinned bit for bit against the model's fp16 sum, which
// overflows the same way; the values that fit stay exact.
void check_fp16_overflow(Comm& world, float* send, float* recv, std::size_t n,
                         cudaStream_t stream) {
  if (mode.compressor != "fp16" || world.size < 2) return;
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  for (auto& input : c.model.inputs) {
    for (std::size_t i = 0; i < 16; ++i) input[i] = 40000.0f;  // 2 ranks: 80000 > 65504
  }
  const std::vector<float>& mine = c.model.inputs[world.rank];
  CUDA_OK(cudaMemcpyAsync(send, mine.data(), n * 4, cudaMemcpyHostToDevice, stream));
  issue(c);
  const std::vector<float> got = read_back(c);
  std::size_t infs = 0;
  for (std::size_t i = 0; i < 16; ++i) infs += got[i] == INFINITY;
  expect(infs == 16,
         "fp16 sums past 65504 come out inf on NCCL: " + std::to_string(infs) + " of 16");
  verify("fp16 overflow, bit for bit with the model's fp16 sum", c);
}

// A top-k payload that arrives corrupt (an index past the end in rank 1's,
// put there by the simulated allgather): the device's own check makes every
// value of the result NaN on every rank (kernels::topk_accumulate_gathered),
// nothing is written out of bounds, and the next call on the key is whole again.
void check_corrupt_payload(Comm& world, float* send, float* recv, std::size_t n,
                           cudaStream_t stream) {
  // A call that passes through (a tensor over the residual cap) gathers no payload.
  if (!mode.topk || world.size < 2 || sim::shards_topk(mode, n, world.size) ||
      (mode.ef && n * sizeof(float) > mode.ef_max_bytes))
    return;
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  sim::corrupt_next_allgather(3 * sizeof(std::uint32_t), static_cast<std::uint32_t>(n));
  issue(c);
  CHECK(!sim::take_unused_corruption(), "the call's payloads went through an allgather");
  const std::vector<float> got = read_back(c);
  std::size_t nan = 0;
  for (float x : got) nan += slimreduce::kernels::float_bits(x) == 0x7fc00000u;
  expect(nan == n, "a corrupt payload from rank 1: " + std::to_string(nan) + " of " +
                       std::to_string(n) + " values NaN");
  model.expected(c.model);  // its residuals moved as the call's did
  Call next = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  issue(next);
  verify("the call after a corrupt payload", next);
}

// The compressor switched at run time through the C API (as slimreduce-bench
// does between rounds): residuals and warm-up counts start again under it.
void check_switch(Comm& world, float* const send[3], float* const recv[3],
                  const std::size_t sizes[3], cudaStream_t stream) {
  sim::Mode next = mode;
  next.compressor = mode.topk ? "fp16" : "topk";
  next.topk = !mode.topk;
  next.powersgd = false;
  next.quant = false;
  next.ef = sim::env_or("SLIMREDUCE_ERROR_FEEDBACK", next.topk ? "1" : "0") == "1";
  next.format = slimreduce::reference::Half::fp16;
  CHECK(slimreduce_set_compressor(next.compressor.c_str()) == 0, "slimreduce_set_compressor");
  model = sim::Model(next);
  for (int step = 0; step < 3; ++step) {
    Call c = prepare(world, send[0], recv[0], sizes[0], ncclFloat32, ncclSum, stream);
    issue(c);
    verify(next.topk ? "after a switch to topk" : "after a switch to fp16", c);
  }
  CHECK(slimreduce_set_compressor(mode.compressor.c_str()) == 0, "slimreduce_set_compressor");
  model = sim::Model(mode);
}

// The compressor switched while an eligible call is held in a group (the C
// API says not to; a job may all the same): the call must not be carried by a
// compressor of another kind, and passes through as NCCL would run it.
void check_switch_in_group(Comm& world, float* send, float* recv, std::size_t n,
                           cudaStream_t stream) {
  if (mode.compressor == "none") return;
  const char* other = mode.topk ? "fp16" : "topk";
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  c.model.passes_through = true;
  NCCL_OK(ncclGroupStart());
  issue(c);
  CHECK(slimreduce_set_compressor(other) == 0, "slimreduce_set_compressor");
  NCCL_OK(ncclGroupEnd());
  verify("a call held while the compressor switched kind: passed through", c);
  CHECK(slimreduce_set_compressor(mode.compressor.c_str()) == 0, "slimreduce_set_compressor");
  model = sim::Model(mode);  // the switches dropped every residual and warm-up count
}

// A non-blocking communicator: its calls pass through, and so do the others
// of a group that holds one. The caller's own call on it (an allgather) in a
// group with an eligible call: that call is compressed, and the group end
// still answers ncclInProgress for the caller to poll.
void check_non_blocking(Comm& world, float* const send[3], float* const recv[3],
                        const std::size_t sizes[3], cudaStream_t stream) {
  Comm quick = make_world_comm(false);
  Call alone = prepare(quick, send[0], recv[0], sizes[0], ncclFloat32, ncclSum, stream);
  alone.model.passes_through = true;
  may_progress(ncclAllReduce(send[0], recv[0], sizes[0], ncclFloat32, ncclSum, quick.nccl, stream),
               "ncclAllReduce, non-blocking");
  wait_ready(quick.nccl);
  verify("non-blocking communicator: passed through", alone);

  Call a = prepare(quick, send[0], recv[0], sizes[0], ncclFloat32, ncclAvg, stream);
  Call b = prepare(world, send[1], recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  a.model.passes_through = b.model.passes_through = true;
  NCCL_OK(ncclGroupStart());
  issue(a);
  issue(b);
  may_progress(ncclGroupEnd(), "ncclGroupEnd, non-blocking in the group");
  wait_ready(quick.nccl);
  verify("group with a non-blocking call: passed through", a);
  verify("its blocking neighbour: passed through", b);

  const std::size_t gathered = 1000;
  const std::vector<float> mine = sim::values_for(next_call++, world.rank, gathered, ncclFloat32);
  CUDA_OK(cudaMemcpyAsync(send[2], mine.data(), gathered * 4, cudaMemcpyHostToDevice, stream));
  Call c = prepare(world, send[1], recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllGather(send[2], recv[2], gathered, ncclFloat32, quick.nccl, stream));
  issue(c);
  const ncclResult_t end = ncclGroupEnd();
  CHECK(end == ncclInProgress, "the end in progress reaches the caller");
  wait_ready(quick.nccl);
  verify("group with the caller's non-blocking allgather: compressed", c);
  std::vector<float> all(gathered * quick.size);
  CUDA_OK(cudaMemcpyAsync(all.data(), recv[2], all.size() * 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const bool mine_in_place =
      std::memcmp(all.data() + gathered * quick.rank, mine.data(), gathered * 4) == 0;
  expect(mine_in_place, "the allgather beside it");
  NCCL_OK(ncclCommDestroy(quick.nccl));
}

// Communicators made by ncclCommInitRankScalable (PyTorch's init past 128
// ranks), ncclCommShrink and ncclCommGrow (fault tolerance, elastic jobs):
// their calls are compressed like any other's, and each is forgotten at destroy.
void check_other_makers(const Comm& world, float* send, float* recv, std::size_t n,
                        cudaStream_t stream) {
  Comm scalable{nullptr, world.rank, world.size, next_comm_id++};
  ncclUniqueId ids[2];
  if (world.rank == 0)
    for (ncclUniqueId& id : ids) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(ids, sizeof ids, MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_OK(ncclCommInitRankScalable(&scalable.nccl, world.size, world.rank, 2, ids, nullptr));
  for (int step = 0; step < 2; ++step)
    reduce_on(scalable, "ncclCommInitRankScalable communicator", send, recv, n, stream);
  NCCL_OK(ncclCommDestroy(scalable.nccl));
  model.forget(scalable.id);
  if (world.size < 2) return;

  // The last rank leaves (it makes no call meanwhile), then joins again.
  const int leaving = world.size - 1;
  const bool left = world.rank == leaving;
  const int calls = 2;
  Comm shrunk{nullptr, world.rank, world.size - 1, next_comm_id++};
  if (!left) {
    int exclude[1] = {leaving};
    NCCL_OK(ncclCommShrink(world.nccl, exclude, 1, &shrunk.nccl, nullptr, NCCL_SHRINK_DEFAULT));
    for (int step = 0; step < calls; ++step)
      reduce_on(shrunk, "ncclCommShrink communicator", send, recv, n, stream);
  } else {
    next_call += calls;  // the inputs' seeds stay aligned on every rank
  }
  ncclUniqueId grow_id{};
  if (world.rank == 0) NCCL_OK(ncclCommGetUniqueId(shrunk.nccl, &grow_id));
  MPI_Bcast(&grow_id, sizeof grow_id, MPI_BYTE, 0, MPI_COMM_WORLD);  // handed out of band
  Comm grown{nullptr, world.rank, world.size, next_comm_id++};
  NCCL_OK(ncclCommGrow(shrunk.nccl, world.size, world.rank == 0 || left ? &grow_id : nullptr,
                       left ? leaving : -1, &grown.nccl, nullptr));
  if (!left) {
    NCCL_OK(ncclCommDestroy(shrunk.nccl));
    model.forget(shrunk.id);
  }
  for (int step = 0; step < calls; ++step)
    reduce_on(grown, left ? "ncclCommGrow, the rank that joined" : "ncclCommGrow communicator",
              send, recv, n, stream);
  NCCL_OK(ncclCommDestroy(grown.nccl));
  model.forget(grown.id);
}

// NCCL_COLLCONFIG_INITIALIZER where nccl.h has it (NCCL 2.32 and later);
// before, the same values from SlimReduce's copy of the layout.
ncclCollConfig_t unset_coll_config() {
#ifdef NCCL_COLLCONFIG_INITIALIZER
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
#else
  ncclCollConfig_t config = slimreduce::nccl_coll_config_defaults();
#endif
  return config;
}

// ncclAllReduceConfig (NCCL 2.32): without a config, or with one that leaves
// every choice to NCCL, it is the plain call and is compressed; a config that
// asks for something (a CTA bound here) passes the call through, and the
// call reaches NCCL with that config. Alone and in a group beside a plain call.
void check_coll_config(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream) {
  const ncclCollConfig_t unset = unset_coll_config();
  ncclCollConfig_t tuned = unset_coll_config();
  tuned.maxCTAs = 4;
  const bool compressing = mode.compressor != "none";
  for (const ncclCollConfig_t* config : {static_cast<const ncclCollConfig_t*>(nullptr), &unset}) {
    const std::string what =
        config ? "ncclAllReduceConfig, config left unset" : "ncclAllReduceConfig, no config";
    const std::uint64_t eligible_before = eligible_count();
    const std::size_t received_before = sim::nccl_configs_received();
    Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
    NCCL_OK(ncclAllReduceConfig(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream, config));
    verify(what.c_str(), c);
    if (compressing) expect(eligible_count() > eligible_before, what + ": taken as eligible");
    expect(sim::nccl_configs_received() == received_before, what + ": made as the plain call");
  }

  const slimreduce_counters before = counters_now();
  const std::size_t received_before = sim::nccl_configs_received();
  Call tuned_call = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  tuned_call.model.passes_through = true;
  NCCL_OK(ncclAllReduceConfig(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream, &tuned));
  verify("ncclAllReduceConfig, CTA bound: passed through", tuned_call);
  const slimreduce_counters after = counters_now();
  expect(after.passed_through == before.passed_through + 1 && after.compressed == before.compressed,
         "ncclAllReduceConfig, CTA bound: counted as passed through");
  expect(sim::nccl_configs_received() == received_before + 1,
         "ncclAllReduceConfig, CTA bound: reached NCCL with its config");

  // In a group: the tuned call passes through, its plain neighbour is compressed.
  float* const other_send = send + n;
  float* const other_recv = recv + n;
  Call a = prepare(world, send, recv, n, ncclFloat32, ncclAvg, stream);
  Call b = prepare(world, other_send, other_recv, n, ncclFloat32, ncclSum, stream);
  a.model.passes_through = true;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduceConfig(send, recv, n, ncclFloat32, ncclAvg, world.nccl, stream, &tuned));
  NCCL_OK(ncclAllReduceConfig(other_send, other_recv, n, ncclFloat32, ncclSum, world.nccl, stream,
                              &unset));
  NCCL_OK(ncclGroupEnd());
  verify("group: the call with a CTA bound, passed through", a);
  verify("group: its neighbour without one", b);
  expect(sim::nccl_configs_received() == received_before + 2,
         "group: only the call with a CTA bound reached NCCL with its config");
}

// int8's wire bytes, by hand: its parts to the other owners (each quant8
// block of a shard, a 4-byte scale (8 bytes of step and offset with min-max
// codes) per bucket and a byte per value, padded
// to 4 bytes), then a ring allgather of one result slot (the largest
// owner's block, padded to 8 bytes): (ranks - 1) slots.
void check_int8_bytes(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream) {
  if (!mode.quant || mode.quant_bits != 8) return;
  const std::size_t bucket = mode.quant_bucket;
  const std::size_t per_bucket = mode.minmax() ? 8 : 4;
  auto block = [&](std::size_t count) {
    return (count + bucket - 1) / bucket * per_bucket + count;
  };
  const std::vector<std::size_t> bounds = sim::int8_bounds(n, world.size, bucket);
  double want = 0;
  std::size_t slot = 0;
  for (int s = 0; s < world.size; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    if (s != world.rank) want += static_cast<double>((block(count) + 3) / 4 * 4);
    slot = std::max(slot, block(count));
  }
  want += static_cast<double>((world.size - 1) * ((slot + 7) / 8 * 8));
  const slimreduce_counters before = counters_now();
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  issue(c);
  verify("int8, its bytes counted", c);
  const slimreduce_counters after = counters_now();
  const double got = after.wire_sent - before.wire_sent;
  expect(after.compressed == before.compressed + 1 && got == want,
         "int8 bytes sent: " + std::to_string(got) + ", by hand " + std::to_string(want));
}

namespace {

double counter(const char* key) {
  double value = -1;
  CHECK(slimreduce_get_counter(key, &value) == 0, key);
  return value;
}

}  // namespace

// Sharded top-k's wire bytes, by hand, for a receive buffer never used (no
// residual yet): this rank's top k of its input cut by even shards, each
// part (indices and values, padded to 4 bytes) to its owner; 8 bytes of
// size to every other rank first; a ring allgather of one result slot (the
// largest owner's result: a 4-byte tag and its top-k payload or its shard in
// 16 bits, padded to 8 bytes). Counted as a sharded top-k call.
void check_topk_sharded_bytes(Comm& world, float* send, std::size_t n, cudaStream_t stream) {
  if (!sim::shards_topk(mode, n, world.size)) return;
  namespace ref = slimreduce::reference;
  float* recv = nullptr;
  CUDA_OK(cudaMalloc(&recv, n * sizeof(float)));
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  const bool fp16 = mode.fp16_values;
  const std::vector<std::uint32_t> index =
      ref::topk_compress(c.model.inputs[world.rank].data(), nullptr, n,
                         ref::topk_count(n, mode.ratio), fp16)
          .index;
  const std::vector<std::size_t> bounds = sim::even_bounds(n, world.size);
  double want = 8.0 * (world.size - 1);
  std::size_t slot = 0;
  for (int s = 0; s < world.size; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    const auto in_shard = std::count_if(index.begin(), index.end(), [&](std::uint32_t i) {
      return i >= bounds[s] && i < bounds[s + 1];
    });
    const std::size_t part = ref::topk_payload_bytes(static_cast<std::size_t>(in_shard), fp16);
    if (s != world.rank) want += static_cast<double>((part + 3) / 4 * 4);
    const std::size_t owner_k = ref::topk_payload_bytes(ref::topk_count(count, mode.ratio), fp16);
    slot = std::max(slot, 4 + std::min(owner_k, count * 2));  // top-k, or 16 bits if no larger
  }
  want += static_cast<double>((world.size - 1) * ((slot + 7) / 8 * 8));
  const double calls_before = counter("calls.topk_sharded");
  const double sent_before = counter("bytes.topk_sharded_sent");
  const slimreduce_counters before = counters_now();
  issue(c);
  verify("sharded top-k, its bytes counted", c);
  const slimreduce_counters after = counters_now();
  const double got = after.wire_sent - before.wire_sent;
  const double got_sharded = counter("bytes.topk_sharded_sent") - sent_before;
  expect(counter("calls.topk_sharded") == calls_before + 1 && got == want && got_sharded == want,
         "sharded top-k bytes sent: " + std::to_string(got) + " (" + std::to_string(got_sharded) +
             " as sharded), by hand " + std::to_string(want));
  CUDA_OK(cudaFree(recv));  // its residual stays with the library's key, as the model's does
}

}  // namespace ranks_job
