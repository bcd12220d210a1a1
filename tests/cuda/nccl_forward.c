/* Runs without a GPU: ncclAllReduce, ncclGroupStart/End and ncclCommDestroy
 * reach SlimReduce's NCCL shim (linked ahead of NCCL), which must find the
 * real NCCL and hand back exactly what NCCL answers (here: errors, as there
 * is no communicator), counting the call as passed through; and the C API
 * works from the NCCL engine alone, with no MPI. Exit 0: all as expected. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/slimreduce.h"

ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);
ncclResult_t pncclCommDestroy(ncclComm_t);
#if NCCL_VERSION_CODE >= 22200
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t*);
#endif
#if NCCL_VERSION_CODE < 22900 /* as backends/nccl_compat.h declares it */
ncclResult_t ncclCommGrow(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*);
#endif

static int failures = 0;

static void expect(const char* what, int got, int want) {
  printf("%s %s: %d (expected %d)\n", got == want ? "ok  " : "FAIL", what, got, want);
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

#if NCCL_VERSION_CODE >= 22200 /* NCCL 2.22 brought ncclGroupSimulateEnd */
  {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER, real_sim = NCCL_SIM_INFO_INITIALIZER;
    int ours_sim = ncclGroupStart();
    ours_sim = ours_sim * 100 + ncclGroupSimulateEnd(&sim);
    int real_sim_rc = pncclGroupStart();
    real_sim_rc = real_sim_rc * 100 + pncclGroupSimulateEnd(&real_sim);
    expect("ncclGroupStart then ncclGroupSimulateEnd", ours_sim, real_sim_rc);
  }
#endif

#if NCCL_VERSION_CODE < 22900
  /* A function newer than this NCCL: SlimReduce exports it all the same (a job
   * can only call it with an NCCL that has it); called here, where the real
   * one is missing, it answers ncclSystemError and makes nothing. */
  {
    ncclComm_t grown = NULL;
    expect("ncclCommGrow with an NCCL before 2.29", ncclCommGrow(NULL, 2, NULL, -1, &grown, NULL),
           ncclSystemError);
    expect("  made no communicator", grown == NULL, 1);
  }
#endif

  /* No MPI here: the C API answers from the NCCL engine, which the calls above
   * started under SLIMREDUCE_COMPRESSOR=fp16 (set by the test). */
  const char* compressor = slimreduce_compressor();
  expect("slimreduce_compressor() is fp16", compressor && strcmp(compressor, "fp16") == 0, 1);
  slimreduce_counters all = {0};
  expect("slimreduce_get_counters", slimreduce_get_counters(&all), 0);
  expect("  counts the NCCL call", (int)all.intercepted, 1);
  expect("slimreduce_set_topk_ratio(0.05)", slimreduce_set_topk_ratio(0.05), 0);
  expect("slimreduce_set_topk_ratio(1.5) refused", slimreduce_set_topk_ratio(1.5), -1);
  char ratio[32] = "";
  expect("slimreduce_get_setting",
         slimreduce_get_setting("SLIMREDUCE_TOPK_RATIO", ratio, sizeof ratio), 0);
  expect("  gives the ratio set", strtod(ratio, NULL) == 0.05, 1);
  expect("slimreduce_set_compressor(bf16)", slimreduce_set_compressor("bf16"), 0);
  compressor = slimreduce_compressor();
  expect("  takes effect", compressor && strcmp(compressor, "bf16") == 0, 1);
  expect("slimreduce_set_compressor(fp17) refused", slimreduce_set_compressor("fp17"), -1);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
