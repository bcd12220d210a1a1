/* Runs without a GPU, under LD_PRELOAD=libslimreduce_nccl.so: a job that
 * loads NCCL privately (a framework's extension module, opened with
 * dlopen(RTLD_LOCAL), links it: PyTorch's way). NCCL is then in neither the
 * global scope nor after SlimReduce in it, so neither the pnccl* aliases nor
 * RTLD_NEXT find it: SlimReduce must find it among the loaded objects, and
 * hand back exactly what NCCL answers, counting the call; and it must take
 * NCCL itself (libnccl.so.2), not the module that depends on it, as its INFO
 * line says (SLIMREDUCE_LOG_LEVEL=info).
 * Usage: nccl_private path/to/libfake_torch_cuda.so. Exit 0: as expected. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/slimreduce.h"

static int failures = 0;

/* stderr into a file while SlimReduce logs, then back; the file's text. */
static int saved_stderr = -1;
static char log_path[] = "/tmp/nccl_private_XXXXXX";
static void capture_stderr(void) {
  const int fd = mkstemp(log_path);
  fflush(stderr);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}
static void release_stderr(char* text, size_t size) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  FILE* file = fopen(log_path, "r");
  const size_t got = file ? fread(text, 1, size - 1, file) : 0;
  text[got] = '\0';
  if (file) fclose(file);
  unlink(log_path);
  fputs(text, stderr);
}

static void expect(const char* what, long long got, long long want) {
  printf("%s %s: %lld (expected %lld)\n", got == want ? "ok  " : "FAIL", what, got, want);
  failures += got != want;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nccl_private FRAMEWORK.so\n");
    return 2;
  }
  typedef int (*Counters)(slimreduce_counters*);
  Counters get = (Counters)dlsym(RTLD_DEFAULT, "slimreduce_nccl_get_counters");
  expect("SlimReduce preloaded", get != NULL, 1);
  expect("NCCL not in the global scope before", dlsym(RTLD_DEFAULT, "pncclAllReduce") == NULL, 1);
  void* framework = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!framework || !get) {
    printf("FAIL dlopen %s: %s\n", argv[1], framework ? "" : dlerror());
    return 1;
  }
  expect("NCCL still not in the global scope", dlsym(RTLD_DEFAULT, "pncclAllReduce") == NULL, 1);
  int (*ours)(void) = (int (*)(void))dlsym(framework, "framework_allreduce");
  int (*real)(void) = (int (*)(void))dlsym(framework, "framework_real_allreduce");
  if (!ours || !real) {
    printf("FAIL the framework's functions\n");
    return 1;
  }
  /* ncclSystemError (2) would mean SlimReduce found no NCCL to forward to. */
  capture_stderr();
  const int ours_rc = ours();
  static char log[8192];
  release_stderr(log, sizeof log);
  expect("ncclAllReduce from the framework, as NCCL answers it", ours_rc, real());
  const char* origin = strstr(log, "real NCCL: loaded privately: ");
  expect("the real NCCL found among the loaded objects", origin != NULL, 1);
  expect("and it is libnccl.so, not the module", origin && strstr(origin, "/libnccl.so") != NULL,
         1);
  slimreduce_counters c = {0};
  expect("slimreduce_nccl_get_counters", get(&c), 0);
  expect("intercepted", (long long)c.intercepted, 1);
  expect("passed through", (long long)c.passed_through, 1);
  printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
