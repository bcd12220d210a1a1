#include "core/nccl/wire_check.h"

#include <cstdio>
#include <memory>
#include <string>

#include "backends/nccl_backend.h"
#include "backends/nccl_transport.h"
#include "backends/status.h"
#include "core/runtime/wire_agreement.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

ncclResult_t cuda_rc(cudaError_t rc) { return backends::nccl_code(Status::cuda(rc)); }

// Device memory for the exchange, freed when it goes (after the host wait).
struct DeviceBytes {
  void* ptr = nullptr;
  explicit DeviceBytes(std::size_t bytes, cudaError_t* rc) { *rc = cudaMalloc(&ptr, bytes); }
  ~DeviceBytes() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
};

// Every rank's record, in rank order: ranks x kRecordBytes.
ncclResult_t gather_records(ncclComm_t comm, int size, cudaStream_t stream,
                            const std::vector<char>& record, std::vector<char>* records) {
  const std::size_t bytes = wire_agreement::kRecordBytes;
  cudaError_t crc = cudaSuccess;
  DeviceBytes all(bytes * static_cast<std::size_t>(size + 1), &crc);  // the last slot: mine
  if (crc != cudaSuccess) return cuda_rc(crc);
  char* mine = static_cast<char*>(all.ptr) + bytes * static_cast<std::size_t>(size);
  crc = cudaMemcpyAsync(mine, record.data(), bytes, cudaMemcpyHostToDevice, stream);
  if (crc != cudaSuccess) return cuda_rc(crc);
  const ncclResult_t rc =
      real::call(real::api().all_gather, mine, all.ptr, bytes, ncclChar, comm, stream);
  if (rc != ncclSuccess) return rc;
  records->resize(bytes * static_cast<std::size_t>(size));
  crc = cudaMemcpyAsync(records->data(), all.ptr, records->size(), cudaMemcpyDeviceToHost, stream);
  if (crc == cudaSuccess) crc = cudaStreamSynchronize(stream);
  return cuda_rc(crc);
}

}  // namespace

ncclResult_t check_wire_agreement(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                                  const std::vector<char>& record) {
  namespace agreement = wire_agreement;
  const agreement::Fingerprint mine = agreement::fingerprint(record);
  agreement::Fingerprint reduced{};
  {
    cudaError_t crc = cudaSuccess;
    DeviceBytes words(sizeof mine.words, &crc);
    if (crc != cudaSuccess) return cuda_rc(crc);
    crc = cudaMemcpyAsync(words.ptr, mine.words, sizeof mine.words, cudaMemcpyHostToDevice, stream);
    if (crc != cudaSuccess) return cuda_rc(crc);
    const ncclResult_t rc = real::call(real::api().all_reduce, words.ptr, words.ptr, 2, ncclUint64,
                                       ncclMax, comm, stream);
    if (rc != ncclSuccess) return rc;
    crc = cudaMemcpyAsync(reduced.words, words.ptr, sizeof reduced.words, cudaMemcpyDeviceToHost,
                          stream);
    if (crc == cudaSuccess) crc = cudaStreamSynchronize(stream);
    if (crc != cudaSuccess) return cuda_rc(crc);
  }
  if (agreement::all_agree(reduced)) return ncclSuccess;
  // Every rank saw the same MAX, so every rank is here: gather the records.
  std::vector<char> records;
  if (const ncclResult_t rc = gather_records(comm, size, stream, record, &records);
      rc != ncclSuccess)
    return rc;
  if (rank == 0) {
    std::string line = agreement::describe_disagreement(records, size);
    if (line.empty()) line = "ranks disagree on what shapes the wire";  // a hash, not a field
    std::fprintf(stderr, "slimreduce: %s\n", line.c_str());
    std::fflush(stderr);
  }
  return ncclInvalidUsage;
}

}  // namespace slimreduce
