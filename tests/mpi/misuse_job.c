/* An MPI call before MPI_Init or after MPI_Finalize: MPI forbids both, and
 * Open MPI stops the job with a message that names the call. Under the
 * preloaded library the job must stop the same way, with the message naming
 * the same call (not one SlimReduce would have made for it).
 *   misuse_job before|after|after-iallreduce
 * (run by tests/mpi/check_misuse.sh, with and without the preload). The
 * floats are eligible at SLIMREDUCE_MIN_BYTES=4. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  float in[1024], out[1024];
  for (int i = 0; i < 1024; ++i) in[i] = (float)i;
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "before") == 0) {
    MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("misuse_job: MPI_Allreduce before MPI_Init returned\n");
    return 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* a compressed call first */
  MPI_Finalize();
  if (strcmp(mode, "after") == 0) {
    MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    MPI_Request request;
    MPI_Iallreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  }
  printf("misuse_job: a call after MPI_Finalize returned\n");
  return 0;
}
