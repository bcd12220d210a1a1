/* A rank that dies mid-job (docs/reliability.md): every rank reduces 4 MiB
 * of floats over and over, with MPI_Allreduce ("blocking", argv[1]) or
 * MPI_Iallreduce then MPI_Wait ("queued"), and rank 1 dies while its main
 * thread is inside one of those calls (MPI_Allreduce, or MPI_Wait, where a
 * queued call runs). A second thread waits DIE_AFTER_MS (argv[3], default
 * 300), then, by argv[2]:
 *  - "abort": signals the main thread until the signal finds it inside the
 *    call, and the handler prints a marker and calls abort() there;
 *  - "exit": waits until the main thread is inside the call, prints a marker
 *    and calls exit(1) itself, so that the exit handlers (SlimReduce's report
 *    and timeline) run while the main thread is still inside the call.
 * The other ranks are then inside the same collective, waiting for rank 1:
 * the job must end with the MPI's own error (check_dead_rank.sh times it),
 * not hang in SlimReduce. The marker says how many calls came before and how
 * many of them SlimReduce compressed (its counters, through dlsym: 0 without
 * the library), so the checker can tell that the call rank 1 died in was a
 * compressed one (every call has the same arguments, so each is decided alike).
 * Exit 0 only if no rank died within MAX_CALLS calls (a failure for the checker). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kCount = 1 << 20, kMaxCalls = 200000 };
enum { kOutside = 0, kInAllreduce = 1, kInIallreduce = 2, kInWait = 3 };

static atomic_int where = kOutside; /* written by the main thread only; lock-free */
static atomic_long calls_done;
static atomic_long compressed_done;
static int die_in = kInAllreduce; /* where the handler may abort */
static int by_exit;               /* exit(1) from the second thread, not abort() */
static pthread_t main_thread;

/* Formats and writes with write(2) alone: called from a signal handler. */
static void put_number(char** out, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = (char)('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (n > 0) *(*out)++ = digits[--n];
}

static void put_text(char** out, const char* text) {
  while (*text) *(*out)++ = *text++;
}

/* The marker, with write(2) alone (in a signal handler too). */
static void say_dying(const char* how) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char line[200], *p = line;
  put_text(&p, "dead_rank_job: rank 1 ");
  put_text(&p, how);
  put_text(&p, " inside ");
  put_text(&p, die_in == kInWait ? "MPI_Wait" : "MPI_Allreduce");
  put_text(&p, " after ");
  put_number(&p, atomic_load(&calls_done));
  put_text(&p, " calls, compressed ");
  put_number(&p, atomic_load(&compressed_done));
  put_text(&p, " at ");
  put_number(&p, (long)now.tv_sec);
  put_text(&p, ".");
  long ms = now.tv_nsec / 1000000;
  *p++ = (char)('0' + ms / 100);
  *p++ = (char)('0' + ms / 10 % 10);
  *p++ = (char)('0' + ms % 10);
  *p++ = '\n';
  if (write(STDERR_FILENO, line, (size_t)(p - line)) < 0) _exit(3);
}

static void die_here(int signo) {
  (void)signo;
  if (where != die_in) return; /* not inside the call: the killer tries again */
  say_dying("dies");
  abort();
}

static void* killer(void* arg) {
  const long after_ms = *(const long*)arg;
  struct timespec pause = {after_ms / 1000, (after_ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
  while (atomic_load(&calls_done) < 2) usleep(1000); /* a few calls known compressed first */
  struct timespec tick = {0, 200000};                /* 0.2 ms */
  if (by_exit) {
    while (where != die_in) nanosleep(&tick, NULL);
    say_dying("exits");
    exit(1);
  }
  for (;;) {
    pthread_kill(main_thread, SIGUSR1);
    nanosleep(&tick, NULL);
  }
  return NULL;
}

static long compressed_so_far(void) {
  typedef int (*get_counter_fn)(const char*, double*);
  static get_counter_fn get_counter;
  static int looked;
  if (!looked) {
    get_counter = (get_counter_fn)dlsym(RTLD_DEFAULT, "slimreduce_get_counter");
    looked = 1;
  }
  double value = 0;
  if (!get_counter || get_counter("calls.compressed", &value) != 0) return 0;
  return (long)value;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int queued = argc > 1 && strcmp(argv[1], "queued") == 0;
  by_exit = argc > 2 && strcmp(argv[2], "exit") == 0;
  long after_ms = argc > 3 ? atol(argv[3]) : 300;
  die_in = queued ? kInWait : kInAllreduce;
  float* input = malloc(sizeof(float) * kCount);
  float* values = malloc(sizeof(float) * kCount);
  for (int i = 0; i < kCount; ++i) input[i] = (float)((i * 7 + rank) % 13) - 6.0f;

  pthread_t thread;
  if (rank == 1) {
    main_thread = pthread_self();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = die_here;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    pthread_create(&thread, NULL, killer, &after_ms);
  }
  for (long call = 0; call < kMaxCalls; ++call) {
    memcpy(values, input, sizeof(float) * kCount); /* the same arguments each call */
    if (queued) {
      MPI_Request request;
      where = kInIallreduce;
      MPI_Iallreduce(MPI_IN_PLACE, values, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
      where = kInWait;
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      where = kInAllreduce;
      MPI_Allreduce(MPI_IN_PLACE, values, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    where = kOutside;
    atomic_store(&compressed_done, compressed_so_far());
    atomic_store(&calls_done, call + 1);
  }
  fprintf(stderr, "dead_rank_job: rank %d made %d calls and no rank died\n", rank, kMaxCalls);
  free(values);
  free(input);
  MPI_Finalize();
  return 0;
}
