/* What MPI_Wait costs a job's own point-to-point traffic under SlimReduce,
 * which intercepts the waits and tests for its queued MPI_Iallreduce calls
 * (docs/architecture.md, "Fusion"): round trips of one double between ranks
 * 0 and 1, each an MPI_Isend or MPI_Irecv and its MPI_Wait (two waits per
 * rank per round trip), nothing queued. Run with and without the library
 * preloaded, alternated (docs/performance.md, section 5).
 * Usage: mpirun -np 2 wait_latency [round trips, default 200000] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int trips = argc > 1 ? atoi(argv[1]) : 200000;
  const int peer = 1 - rank;
  double sent = 0, received = 0;
  MPI_Request request;
  for (int pass = 0; pass < 2; ++pass) { /* the first pass warms up */
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < trips; ++i) {
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg == 0) == (rank == 0)) {
          MPI_Isend(&sent, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD, &request);
        } else {
          MPI_Irecv(&received, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD, &request);
        }
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      }
    }
    const double took = MPI_Wtime() - start;
    if (rank == 0 && pass == 1) printf("%.3f us per round trip\n", 1e6 * took / trips);
  }
  MPI_Finalize();
  return 0;
}
