#include "core/device_staging.h"

#ifndef SLIMREDUCE_HAVE_CUDA

namespace slimreduce::device_staging {

bool is_device_pointer(const void*) { return false; }
bool keeps_residual_on_device(const AllreduceCall&, const compressors::Compressor&,
                              const Settings&) {
  return false;
}
int allreduce(const AllreduceCall&, compressors::Compressor&, const Settings&, CommState&, bool,
              double*) {
  return MPI_ERR_INTERN;  // unreachable: no pointer is a device pointer here
}
void forget_communicator(std::uint64_t) {}
void forget_all() {}

}  // namespace slimreduce::device_staging

#else  // SLIMREDUCE_HAVE_CUDA

#include <cuda.h>  // driver types only: the driver is looked up, never linked
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#include "backends/mpi_backend.h"
#include "core/counters.h"
#include "core/nccl_cuda.h"
#include "core/residuals.h"
#include "kernels/cuda/kernels.h"
#include "kernels/topk.h"

namespace slimreduce::device_staging {
namespace {

namespace cuda = kernels::cuda;

// ---- is_device_pointer without touching CUDA in a CPU job ------------------

using PointerGetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

// How many objects the process has loaded so far (glibc's dlpi_adds).
int count_loads(struct dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
    *static_cast<unsigned long long*>(data) = info->dlpi_adds;
  }
  return 1;  // the first object carries the count: stop there
}

// cuPointerGetAttribute of the driver the job loaded, or nullptr while it
// loaded none. "None" is re-checked only after the process loads something.
PointerGetAttribute driver_query() {
  static std::atomic<PointerGetAttribute> found{nullptr};
  static std::atomic<unsigned long long> checked_at{~0ull};
  if (PointerGetAttribute fn = found.load(std::memory_order_acquire)) return fn;
  unsigned long long loads = 0;
  dl_iterate_phdr(count_loads, &loads);
  if (loads == checked_at.load(std::memory_order_relaxed)) return nullptr;
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto fn = driver ? reinterpret_cast<PointerGetAttribute>(dlsym(driver, "cuPointerGetAttribute"))
                   : nullptr;
  if (fn) {
    found.store(fn, std::memory_order_release);  // the handle stays open with the process
  } else {
    if (driver) dlclose(driver);
    checked_at.store(loads, std::memory_order_relaxed);
  }
  return fn;
}

// ---- memory that grows and stays ---------------------------------------------

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
template <class Free>
struct Buffer {
  std::unique_ptr<std::byte, Free> ptr;
  std::size_t bytes = 0;
};

template <class Free>
std::byte* grow(Buffer<Free>& buffer, std::size_t bytes, bool pinned) {
  if (buffer.bytes >= bytes && buffer.ptr) return buffer.ptr.get();
  buffer.ptr.reset();
  buffer.bytes = 0;
  void* raw = nullptr;
  const cudaError_t rc = pinned ? cudaMallocHost(&raw, bytes) : cudaMalloc(&raw, bytes);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  buffer.ptr.reset(static_cast<std::byte*>(raw));
  buffer.bytes = bytes;
  return buffer.ptr.get();
}

using DeviceBuffer = Buffer<DeviceFree>;
using PinnedBuffer = Buffer<PinnedFree>;

struct StreamDelete {
  void operator()(CUstream_st* s) const { cudaStreamDestroy(s); }
};

// What one device needs: a stream of our own and staging space.
struct DeviceContext {
  std::unique_ptr<CUstream_st, StreamDelete> stream;
  DeviceBuffer wire, scratch, gathered;
};

struct Staging {
  std::mutex mutex;  // one staged call at a time: MPI calls block anyway
  std::map<int, DeviceContext> devices;
  PinnedBuffer host_in, host_out;
  std::map<ResidualKey, DeviceBuffer> residuals;
};

// Never destroyed: at exit the CUDA runtime may be gone before our statics.
Staging& staging() {
  static Staging* const s = std::make_unique<Staging>().release();
  return *s;
}

// A failed CUDA step: the caller sees an MPI error, never a wrong result.
int check(cudaError_t rc) {
  if (rc == cudaSuccess) return MPI_SUCCESS;
  cudaGetLastError();
  return MPI_ERR_OTHER;
}

// ---- the wire part on the host ---------------------------------------------------

// Hands already-compressed wire elements to core/algorithms.h's ring: its
// compress() copies them in and decompress() copies the reduced ones out;
// the adds at each hop are the real compressor's. ring_allreduce passes
// call.input and call.output only to these two.
class StagedWire final : public compressors::SummableCompressor {
 public:
  explicit StagedWire(const compressors::SummableCompressor& real) : real_(real) {}
  std::string_view name() const override { return real_.name(); }
  bool default_error_feedback() const override { return false; }
  std::size_t compressed_bytes(std::size_t n) const override { return real_.compressed_bytes(n); }
  std::size_t wire_element_bytes() const override { return real_.wire_element_bytes(); }
  void compress(const float* in, float*, std::size_t n, void* out) override {
    std::memcpy(out, in, n * wire_element_bytes());
  }
  void accumulate(const void* in, void* inout, std::size_t n) const override {
    real_.accumulate(in, inout, n);
  }
  void decompress(const void* in, float* out, std::size_t n) const override {
    std::memcpy(out, in, n * wire_element_bytes());
  }

 private:
  const compressors::SummableCompressor& real_;
};

struct Job {
  const AllreduceCall& call;
  compressors::Compressor& compressor;
  const Settings& settings;
  CommState& state;
  DeviceContext& device;
  float* residual;  // device, or nullptr
  cudaStream_t stream() const { return device.stream.get(); }
};

int sync(const Job& job) { return check(cudaStreamSynchronize(job.stream())); }

int staged_cast(const Job& job, cuda::Elem format, double* wire_sent) {
  Staging& s = staging();
  const std::size_t n = job.call.count;
  const std::size_t bytes = n * sizeof(std::uint16_t);
  std::byte* wire = grow(job.device.wire, bytes, false);
  std::byte* in = grow(s.host_in, bytes, true);
  std::byte* out = grow(s.host_out, bytes, true);
  if (!wire || !in || !out) return MPI_ERR_NO_MEM;
  auto* wire16 = reinterpret_cast<std::uint16_t*>(wire);
  int rc =
      check(cuda::cast_compress(format, job.call.input, job.residual, wire16, n, job.stream()));
  if (rc == MPI_SUCCESS)
    rc = check(cudaMemcpyAsync(in, wire, bytes, cudaMemcpyDeviceToHost, job.stream()));
  if (rc == MPI_SUCCESS) rc = sync(job);
  if (rc != MPI_SUCCESS) return rc;
  StagedWire staged(static_cast<compressors::SummableCompressor&>(job.compressor));
  const AllreduceCall host{reinterpret_cast<const float*>(in), reinterpret_cast<float*>(out), n,
                           nullptr};
  rc = ring_allreduce(host, staged, job.state, wire_sent);
  if (rc != MPI_SUCCESS) return rc;
  rc = check(cudaMemcpyAsync(wire, out, bytes, cudaMemcpyHostToDevice, job.stream()));
  if (rc == MPI_SUCCESS) {
    rc = check(cuda::cast_decompress(format, wire16, job.call.output, n, 1, job.stream()));
  }
  return rc == MPI_SUCCESS ? sync(job) : rc;
}

int staged_topk(const Job& job, std::size_t k, bool fp16_values, double* wire_sent) {
  Staging& s = staging();
  const std::size_t n = job.call.count;
  const int ranks = job.state.size();
  const std::size_t payload = kernels::topk_payload_bytes(
      k, fp16_values ? kernels::TopkValues::fp16 : kernels::TopkValues::fp32);
  const std::size_t stride = cuda::topk_payload_stride(payload);
  const std::size_t scratch_bytes =
      std::max(cuda::topk_select_scratch_bytes(n), cuda::topk_accumulate_scratch_bytes(n, ranks));
  std::byte* scratch = grow(job.device.scratch, scratch_bytes, false);
  std::byte* dpayload = grow(job.device.wire, stride, false);
  std::byte* gathered = grow(job.device.gathered, stride * ranks, false);
  std::byte* in = grow(s.host_in, payload, true);
  std::byte* out = grow(s.host_out, payload * ranks, true);
  if (!scratch || !dpayload || !gathered || !in || !out) return MPI_ERR_NO_MEM;
  int rc = check(cuda::topk_select(cuda::Elem::fp32, job.call.input, job.residual, n, k,
                                   fp16_values, dpayload, stride, scratch, job.stream()));
  if (rc == MPI_SUCCESS)
    rc = check(cudaMemcpyAsync(in, dpayload, payload, cudaMemcpyDeviceToHost, job.stream()));
  if (rc == MPI_SUCCESS) rc = sync(job);
  if (rc != MPI_SUCCESS) return rc;
  // The same bytes on the wire as the host path: payloads of exactly `payload` bytes.
  MPI_Comm comm = MPI_COMM_NULL;
  if ((rc = job.state.private_comm(&comm)) != MPI_SUCCESS) return rc;
  if ((rc = backends::mpi::allgather_bytes(in, payload, out, comm)) != MPI_SUCCESS) return rc;
  rc = check(cudaMemcpy2DAsync(gathered, stride, out, payload, payload, ranks,
                               cudaMemcpyHostToDevice, job.stream()));
  if (rc == MPI_SUCCESS) {
    rc = check(cuda::topk_accumulate(gathered, stride, ranks, k, fp16_values, n, cuda::Elem::fp32,
                                     job.call.output, 1, scratch, job.stream()));
  }
  if (rc == MPI_SUCCESS) rc = sync(job);
  *wire_sent = ring_allgather_wire_bytes(payload, ranks);
  return rc;
}

// Any other compressor (or a host buffer on one side): fp32 through pinned
// memory and the host algorithm, with the engine's host residual.
int staged_host(const Job& job, double* wire_sent) {
  Staging& s = staging();
  const std::size_t bytes = job.call.count * sizeof(float);
  std::byte* in = grow(s.host_in, bytes, true);
  std::byte* out = grow(s.host_out, bytes, true);
  if (!in || !out) return MPI_ERR_NO_MEM;
  int rc = check(cudaMemcpyAsync(in, job.call.input, bytes, cudaMemcpyDefault, job.stream()));
  if (rc == MPI_SUCCESS) rc = sync(job);
  if (rc != MPI_SUCCESS) return rc;
  const AllreduceCall host{reinterpret_cast<const float*>(in), reinterpret_cast<float*>(out),
                           job.call.count, job.call.residual};
  if (job.compressor.aggregation() == compressors::Aggregation::summable) {
    rc = ring_allreduce(host, static_cast<compressors::SummableCompressor&>(job.compressor),
                        job.state, wire_sent);
  } else {
    rc = gather_allreduce(host, static_cast<compressors::GatheredCompressor&>(job.compressor),
                          job.state, wire_sent);
  }
  if (rc != MPI_SUCCESS) return rc;
  rc = check(cudaMemcpyAsync(job.call.output, out, bytes, cudaMemcpyDefault, job.stream()));
  return rc == MPI_SUCCESS ? sync(job) : rc;
}

int device_of(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attributes.device;
}

DeviceContext* context_for(int device) {
  DeviceContext& context = staging().devices[device];
  if (!context.stream) {
    cudaStream_t stream = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    context.stream.reset(stream);
  }
  return &context;
}

// The device residual of the call's key: zeroed when made or reshaped.
float* residual_for(const AllreduceCall& call, CommState& state, cudaStream_t stream) {
  DeviceBuffer& buffer = staging().residuals[{state.id(), call.output}];
  const std::size_t bytes = call.count * sizeof(float);
  if (buffer.bytes == bytes && buffer.ptr) return reinterpret_cast<float*>(buffer.ptr.get());
  buffer.ptr.reset();
  buffer.bytes = 0;
  std::byte* fresh = grow(buffer, bytes, false);
  if (!fresh || cudaMemsetAsync(fresh, 0, bytes, stream) != cudaSuccess) return nullptr;
  return reinterpret_cast<float*>(fresh);
}

}  // namespace

bool is_device_pointer(const void* ptr) {
  PointerGetAttribute query = driver_query();
  if (!ptr || !query) return false;
  auto address = reinterpret_cast<CUdeviceptr>(ptr);
  unsigned int type = 0;
  if (query(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) != CUDA_SUCCESS) return false;
  if (type != CU_MEMORYTYPE_DEVICE) return false;
  int managed = 0;
  return query(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address) == CUDA_SUCCESS && !managed;
}

namespace {

// How a call runs: on the GPU with the cast or top-k kernels, or staged
// through the host algorithm (another compressor, a host buffer on one side,
// or a top-k beyond 32-bit indices).
struct Route {
  enum { host, cast, topk } path = host;
  std::size_t k = 0;
  bool fp16_values = false;
};

Route route_of(const AllreduceCall& call, const compressors::Compressor& compressor,
               const Settings& settings) {
  Route route;
  if (!is_device_pointer(call.input) || !is_device_pointer(call.output)) return route;
  const std::size_t n = call.count;
  const std::string_view name = compressor.name();
  route.fp16_values = settings.topk_values == TopkValueFormat::fp16;
  route.k = kernels::topk_count(n, settings.topk_ratio);
  if ((name == "fp16" || name == "bf16") &&
      compressor.compressed_bytes(n) == n * sizeof(std::uint16_t)) {
    route.path = Route::cast;
  } else if (name == "topk" && n <= 0xffffffffull &&
             compressor.compressed_bytes(n) ==
                 kernels::topk_payload_bytes(route.k, route.fp16_values
                                                          ? kernels::TopkValues::fp16
                                                          : kernels::TopkValues::fp32)) {
    route.path = Route::topk;
  }
  return route;
}

}  // namespace

bool keeps_residual_on_device(const AllreduceCall& call, const compressors::Compressor& compressor,
                              const Settings& settings) {
  return route_of(call, compressor, settings).path != Route::host;
}

int allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
              const Settings& settings, CommState& state, bool error_feedback, double* wire_sent) {
  const int device = device_of(is_device_pointer(call.input) ? call.input : call.output);
  if (device < 0) return MPI_ERR_BUFFER;
  std::lock_guard lock(staging().mutex);
  DeviceGuard guard(device);
  DeviceContext* context = guard.ok() ? context_for(device) : nullptr;
  if (!context) return MPI_ERR_OTHER;
  Job job{call, compressor, settings, state, *context, nullptr};
  const Route route = route_of(call, compressor, settings);
  if (route.path == Route::host) return staged_host(job, wire_sent);
  if (error_feedback && !(job.residual = residual_for(call, state, job.stream()))) {
    return MPI_ERR_NO_MEM;
  }
  if (route.path == Route::topk) return staged_topk(job, route.k, route.fp16_values, wire_sent);
  const bool bf16 = compressor.name() == "bf16";
  return staged_cast(job, bf16 ? cuda::Elem::bf16 : cuda::Elem::fp16, wire_sent);
}

void forget_communicator(std::uint64_t comm_id) {
  Staging& s = staging();
  std::lock_guard lock(s.mutex);
  for (auto it = s.residuals.lower_bound({comm_id, nullptr});
       it != s.residuals.end() && it->first.comm_id == comm_id;) {
    it = s.residuals.erase(it);
  }
}

void forget_all() {
  Staging& s = staging();
  std::lock_guard lock(s.mutex);
  s.residuals.clear();
}

}  // namespace slimreduce::device_staging

#endif  // SLIMREDUCE_HAVE_CUDA
