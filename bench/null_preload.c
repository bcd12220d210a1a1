/* null_preload: the least an MPI_Allreduce interposer can be (a call into
 * PMPI_Allreduce and nothing else). bench/run_all.sh preloads it under
 * overhead_latency as the yardstick for libslimreduce.so's pass-through cost:
 * whatever it measures above 1.00 is the price of any interposition at all. */
#include <mpi.h>

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
