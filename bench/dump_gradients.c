/* dump_gradients: an MPI_Allreduce interposer that writes one call's fp32
 * input to a file per rank and changes nothing, so that
 * bench/quant8_codes_error can measure the codes on a real job's gradients
 * (its fourth argument). The call is the DUMP_GRADIENTS_CALL-th (default
 * 100) MPI_FLOAT call of more than one value; the file DUMP_GRADIENTS_PREFIX
 * (default gradients).<rank>.f32, raw floats. Preloaded alone, without
 * libslimreduce.so:
 *   mpirun -np 4 -x LD_PRELOAD=build/bench/libdump_gradients.so \
 *     build/examples/train_mlp --steps 120 --sync one-buffer */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  static long calls = 0;
  if (datatype == MPI_FLOAT && count > 1) {
    const char* at = getenv("DUMP_GRADIENTS_CALL");
    if (++calls == (at ? atol(at) : 100)) {
      const char* prefix = getenv("DUMP_GRADIENTS_PREFIX");
      int rank = 0;
      char path[4096];
      PMPI_Comm_rank(comm, &rank);
      snprintf(path, sizeof path, "%s.%d.f32", prefix ? prefix : "gradients", rank);
      FILE* file = fopen(path, "wb");
      if (file) {
        fwrite(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, sizeof(float), (size_t)count, file);
        fclose(file);
      }
    }
  }
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
