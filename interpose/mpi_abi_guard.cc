// The wrong library for the job's MPI: libslimreduce.so is built for Open
// MPI's ABI, libslimreduce-mpich.so for the MPICH family's, and either one
// loads into a job of the other family without complaint (its own MPI comes
// along as a dependency). The first MPI call then hands handles of one ABI to
// the other's functions: an MPI error far from the cause, or a crash. So
// before MPI starts (MPI_Init*, or the engine's late start) we look at the MPI
// the job really has, and refuse a mismatch with one line naming both.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "interpose/shim_common.h"

namespace slimreduce::interpose {
namespace {

#if defined(OPEN_MPI)
constexpr bool kBuiltForOpenMpi = true;
// The MPICH family's libraries: MPICH's own, and the ABI initiative's soname
// (Intel MPI, MVAPICH).
constexpr const char* kOtherFamilySonames[] = {"libmpich.so.12", "libmpi.so.12"};
constexpr const char* kOtherFamilyLibrary = "libslimreduce-mpich.so";
#elif defined(MPICH)
constexpr bool kBuiltForOpenMpi = false;
constexpr const char* kOtherFamilySonames[] = {"libmpi.so.40"};  // Open MPI 3 to 5
constexpr const char* kOtherFamilyLibrary = "libslimreduce.so";
#else
#error "mpi.h is neither Open MPI's nor of the MPICH family"
#endif

// MPICH's MPI_MAX_LIBRARY_VERSION_STRING (Open MPI's is 256): enough for either.
constexpr int kVersionBytes = 8192;
using VersionFn = int (*)(char*, int*);

// Whether an MPI's MPI_Get_library_version text is of the other family.
bool other_family(const char* version) {
  return (std::strstr(version, "Open MPI") != nullptr) != kBuiltForOpenMpi;
}

const char* family(bool open_mpi) { return open_mpi ? "Open MPI" : "the MPICH family"; }

// The library file this code is in, for the message.
const char* this_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&refuse_other_mpi_family), &info) && info.dli_fname)
    return info.dli_fname;
  return kBuiltForOpenMpi ? "libslimreduce.so" : "libslimreduce-mpich.so";
}

}  // namespace

void refuse_other_mpi_family(bool before_mpi_init) {
  char version[kVersionBytes] = {};
  int length = 0;
  bool other = false;
  // The MPI our PMPI_* calls reach: the job's, when the job links its MPI
  // (the job's dependencies come before ours in the symbol search order).
  if (PMPI_Get_library_version(version, &length) == MPI_SUCCESS) other = other_family(version);
  // An MPI of the other family that our calls do not reach: loaded privately
  // (RTLD_LOCAL) by a Python extension such as mpi4py's, beside ours. Its own
  // text decides where it has one (libmpi.so.12 was also Open MPI 1.8-1.10's name).
  for (const char* soname : kOtherFamilySonames) {
    if (other) break;
    void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    auto get_version = reinterpret_cast<VersionFn>(dlsym(handle, "PMPI_Get_library_version"));
    if (get_version && get_version(version, &length) == MPI_SUCCESS) {
      other = other_family(version);
    } else {
      other = true;
      std::snprintf(version, sizeof version, "%s", soname);
    }
    dlclose(handle);
  }
  if (!other) return;
  version[std::strcspn(version, "\n")] = '\0';  // MPICH's spans lines: its first names it
  char line[1024];
  std::snprintf(line, sizeof line,
                "%s is built for %s's MPI ABI, but this job's MPI is %s (%s): preload %s, "
                "the build for it (docs/architecture.md, \"Two MPI builds\")",
                this_library(), family(kBuiltForOpenMpi), family(!kBuiltForOpenMpi), version,
                kOtherFamilyLibrary);
  // Every rank finds the same mismatch at the same point, within moments of
  // rank 0: a short wait for its line is enough.
  exit_with_one_line(line, before_mpi_init, std::chrono::seconds(5));
}

}  // namespace slimreduce::interpose
