/* Runs without a GPU: ncclAllReduce, ncclGroupStart/End and ncclCommDestroy
 * reach SlimReduce's NCCL shim (linked ahead of NCCL), which must find the
 * real NCCL and hand back exactly what NCCL answers (here: errors, as there
 * is no communicator), counting the call as passed through. Exit 0: all as
 * expected. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>

#include "interpose/slimreduce.h"

ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);
ncclResult_t pncclCommDestroy(ncclComm_t);

static int failures = 0;

static void expect(const char* what, int got, int want) {
  printf("%s %s: %d (real NCCL: %d)\n", got == want ? "ok  " : "FAIL", what, got, want);
  failures += got != want;
}

int main(void) {
  static float buffer[1024];
  expect("ncclAllReduce without a communicator",
         ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, NULL, NULL),
         pncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, NULL, NULL));
  int ours = ncclGroupStart();
  ours = ours * 100 + ncclGroupEnd();
  int real = pncclGroupStart();
  real = real * 100 + pncclGroupEnd();
  expect("ncclGroupStart then ncclGroupEnd", ours, real);
  expect("ncclCommDestroy(NULL)", ncclCommDestroy(NULL), pncclCommDestroy(NULL));

  int (*get)(slimreduce_counters*) =
      (int (*)(slimreduce_counters*))dlsym(RTLD_DEFAULT, "slimreduce_nccl_get_counters");
  slimreduce_counters c = {0};
  expect("counters readable", get ? get(&c) : -1, 0);
  expect("calls intercepted", (int)c.intercepted, 1);
  expect("calls passed through", (int)c.passed_through, 1);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
