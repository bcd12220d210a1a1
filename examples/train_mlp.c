// train_mlp: a small data-parallel training job in plain C11 + MPI.
//
// It knows nothing of SlimReduce; it is the kind of program a user would run
// unmodified under LD_PRELOAD. Every rank holds a full copy of a two-layer MLP
// (256 -> 2048 ReLU -> 64 classes, 657,472 parameters), draws its own shard of a
// synthetic batch, computes gradients into persistent per-tensor buffers and
// averages them with one MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM)
// per tensor (W1, b1, W2, b2), as data-parallel frameworks do. The loss is
// averaged across ranks every few steps with an MPI_Allreduce of a double.
//
// Data: a fixed random "teacher" (seeded) picks a class c uniformly from 64
// and emits x = mu_c + N(0, I), where the class prototypes mu_c have entries
// drawn from N(0, 0.3^2): a learnable task whose classes overlap a little, so
// the loss keeps falling over the whole run instead of hitting zero at once.
// Each rank draws its shard of every batch from a stream seeded by (rank,
// step), so a run is reproducible for a given world size, batch and step
// count. The final loss is measured on a fixed held-out set of 4096 samples
// that is the same for every world size.
//
// Output: rank 0 prints the training loss periodically and, last, one line
//   final_loss=<held-out loss> steps=<N> params=<P> wall_s=<seconds>

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_IN = 256, N_HID = 2048, N_OUT = 64, N_EVAL = 4096 };
static const float kProtoScale = 0.3f;  // std of the class prototypes' entries

static const uint64_t kSeed = 0x5EEDC0FFEEULL;
static const uint64_t kTagInit = 1, kTagTeacher = 2, kTagTrain = 3, kTagEval = 4;

// ---- deterministic random numbers -----------------------------------------

typedef struct {
  uint64_t s;
} Rng;

static uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// --seed: another initialization and other training batches (the teacher
// and the held-out set stay, so final losses compare across seeds); 0 is
// the default run.
static uint64_t g_run_seed = 0;

// A stream identified by (tag, a, b), independent of everything else.
static Rng rng_for(uint64_t tag, uint64_t a, uint64_t b) {
  uint64_t s = kSeed ^ (tag * 0xD1B54A32D192ED03ULL);
  if (tag == kTagInit || tag == kTagTrain) s ^= g_run_seed * 0xA24BAED4963EE407ULL;
  uint64_t h = splitmix64(&s);
  s = h ^ (a * 0x9E3779B97F4A7C15ULL);
  h = splitmix64(&s);
  s = h ^ (b * 0xC2B2AE3D27D4EB4FULL);
  Rng r = {splitmix64(&s)};
  return r;
}

static double rng_uniform(Rng* r) {  // in (0, 1)
  return ((double)(splitmix64(&r->s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float rng_normal(Rng* r) {  // Box-Muller, one value per call
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void fill_normal(Rng* r, float* v, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng_normal(r);
}

// ---- model ----------------------------------------------------------------

typedef struct {
  float *w1, *b1, *w2, *b2;  // w1: N_IN x N_HID, w2: N_HID x N_OUT (row-major, in x out)
} Params;

typedef struct {
  float* mu;  // N_OUT x N_IN class prototypes
} Teacher;

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n, size);
  if (!p) {
    fprintf(stderr, "train_mlp: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

static Params params_alloc(void) {
  Params p;
  p.w1 = xcalloc((size_t)N_IN * N_HID, sizeof(float));
  p.b1 = xcalloc(N_HID, sizeof(float));
  p.w2 = xcalloc((size_t)N_HID * N_OUT, sizeof(float));
  p.b2 = xcalloc(N_OUT, sizeof(float));
  return p;
}

static void params_free(Params* p) {
  free(p->w1);
  free(p->b1);
  free(p->w2);
  free(p->b2);
}

// Same seed on every rank: all ranks start from identical parameters.
static void params_init(Params* p) {
  Rng r = rng_for(kTagInit, 0, 0);
  fill_normal(&r, p->w1, (size_t)N_IN * N_HID, (float)sqrt(2.0 / N_IN));
  // Small output layer: the initial logits are near zero, so the loss starts
  // near ln(64) = 4.16.
  fill_normal(&r, p->w2, (size_t)N_HID * N_OUT, (float)(0.1 * sqrt(1.0 / N_HID)));
}

static Teacher teacher_make(void) {
  Teacher t;
  t.mu = xcalloc((size_t)N_OUT * N_IN, sizeof(float));
  Rng r = rng_for(kTagTeacher, 0, 0);
  fill_normal(&r, t.mu, (size_t)N_OUT * N_IN, kProtoScale);
  return t;
}

// Draws one labelled sample from r: writes x and returns its class.
static int sample(const Teacher* t, Rng* r, float* x) {
  const int c = (int)(splitmix64(&r->s) % N_OUT);
  fill_normal(r, x, N_IN, 1.0f);
  const float* mu = t->mu + (size_t)c * N_IN;
  for (int k = 0; k < N_IN; ++k) x[k] += mu[k];
  return c;
}

enum { ROW_TILE = 32 };

// The two loops that take the time, also built for AVX2 with FMA and picked
// at load time where the CPU has them (the same clone on every rank of a
// machine; another machine may round differently, as another BLAS would).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONED __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONED
#endif

// out[b x n] = a[b x m] * w[m x n] + bias[n]. For a tile of up to ROW_TILE rows
// of a, each row of w is read once and applied to every row of the tile: the
// tile of out stays in cache and the inner loop streams a row of w and
// vectorizes. Every out element still sums over k in ascending order.
CLONED static void matmul_bias(const float* a, const float* w, const float* bias, float* out, int b,
                               int m, int n) {
  for (int i0 = 0; i0 < b; i0 += ROW_TILE) {
    const int i1 = i0 + ROW_TILE < b ? i0 + ROW_TILE : b;
    for (int i = i0; i < i1; ++i) memcpy(out + (size_t)i * n, bias, sizeof(float) * n);
    for (int k = 0; k < m; ++k) {
      const float* wk = w + (size_t)k * n;
      for (int i = i0; i < i1; ++i) {
        const float aik = a[(size_t)i * m + k];
        if (aik == 0.0f) continue;  // ReLU zeros
        float* o = out + (size_t)i * n;
        for (int j = 0; j < n; ++j) o[j] += aik * wk[j];
      }
    }
  }
}

// Forward pass for b samples. Fills hid (post-ReLU) and logits; returns the
// summed cross-entropy; if dlogits is given, stores (softmax - onehot) * scale.
static double forward(const Params* p, const float* x, const int* y, int b, float* hid,
                      float* logits, float* dlogits, float scale) {
  matmul_bias(x, p->w1, p->b1, hid, b, N_IN, N_HID);
  for (size_t i = 0; i < (size_t)b * N_HID; ++i) hid[i] = hid[i] > 0.0f ? hid[i] : 0.0f;
  matmul_bias(hid, p->w2, p->b2, logits, b, N_HID, N_OUT);
  double loss = 0.0;
  for (int i = 0; i < b; ++i) {
    const float* z = logits + (size_t)i * N_OUT;
    float zmax = z[0];
    for (int j = 1; j < N_OUT; ++j) zmax = z[j] > zmax ? z[j] : zmax;
    double sum = 0.0;
    for (int j = 0; j < N_OUT; ++j) sum += exp((double)(z[j] - zmax));
    const double logsum = log(sum) + zmax;
    loss += logsum - z[y[i]];
    if (dlogits) {
      float* d = dlogits + (size_t)i * N_OUT;
      for (int j = 0; j < N_OUT; ++j) d[j] = (float)(exp(z[j] - logsum) * scale);
      d[y[i]] -= scale;
    }
  }
  return loss;
}

// Backward pass: gradients of the loss whose dlogits were given, written
// (overwritten) into g. w2t is scratch for W2 transposed (N_OUT x N_HID).
CLONED static void backward(const Params* p, const float* x, const float* hid, const float* dlogits,
                            int b, float* dhid, float* w2t, Params* g) {
  memset(g->w1, 0, sizeof(float) * N_IN * N_HID);
  memset(g->b1, 0, sizeof(float) * N_HID);
  memset(g->w2, 0, sizeof(float) * N_HID * N_OUT);
  memset(g->b2, 0, sizeof(float) * N_OUT);
  for (int k = 0; k < N_HID; ++k)
    for (int j = 0; j < N_OUT; ++j) w2t[(size_t)j * N_HID + k] = p->w2[(size_t)k * N_OUT + j];

  // b2 = sum of d; dW2 = h^T d (row k of dW2 stays in cache over the batch).
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < N_OUT; ++j) g->b2[j] += dlogits[(size_t)i * N_OUT + j];
  for (int k = 0; k < N_HID; ++k) {
    float* gw = g->w2 + (size_t)k * N_OUT;
    for (int i = 0; i < b; ++i) {
      const float hik = hid[(size_t)i * N_HID + k];
      if (hik == 0.0f) continue;
      const float* d = dlogits + (size_t)i * N_OUT;
      for (int j = 0; j < N_OUT; ++j) gw[j] += hik * d[j];
    }
  }
  // dh = d W2^T, masked by ReLU; b1 = sum of dh.
  memset(dhid, 0, sizeof(float) * b * N_HID);
  for (int j = 0; j < N_OUT; ++j) {
    const float* wt = w2t + (size_t)j * N_HID;
    for (int i = 0; i < b; ++i) {
      const float dij = dlogits[(size_t)i * N_OUT + j];
      float* dh = dhid + (size_t)i * N_HID;
      for (int k = 0; k < N_HID; ++k) dh[k] += dij * wt[k];
    }
  }
  for (int i = 0; i < b; ++i) {
    const float* h = hid + (size_t)i * N_HID;
    float* dh = dhid + (size_t)i * N_HID;
    for (int k = 0; k < N_HID; ++k) dh[k] = h[k] > 0.0f ? dh[k] : 0.0f;
    for (int k = 0; k < N_HID; ++k) g->b1[k] += dh[k];
  }
  // dW1 = x^T dh (row k of dW1 stays in cache over the batch).
  for (int k = 0; k < N_IN; ++k) {
    float* gw = g->w1 + (size_t)k * N_HID;
    for (int i = 0; i < b; ++i) {
      const float xik = x[(size_t)i * N_IN + k];
      const float* dh = dhid + (size_t)i * N_HID;
      for (int j = 0; j < N_HID; ++j) gw[j] += xik * dh[j];
    }
  }
}

// How the gradients are averaged: one MPI_Allreduce per tensor (as most
// frameworks without fusion), one per step over a buffer holding all four (as
// a framework's fusion buffer: Horovod's), or one MPI_Iallreduce per tensor
// and one MPI_Waitall (as a framework overlapping communication does).
typedef enum { SYNC_PER_TENSOR, SYNC_ONE_BUFFER, SYNC_IALLREDUCE } Sync;

// Data-parallel gradient averaging: one in-place allreduce per tensor.
static void allreduce_mean(float* buf, int n, int world) {
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const float inv = 1.0f / (float)world;
  for (int i = 0; i < n; ++i) buf[i] *= inv;
}

// The four gradient tensors averaged over the ranks, as opt.sync says;
// `fused` holds all four (one-buffer).
static void average_gradients(Params* g, Sync sync, float* fused, int world) {
  float* tensors[4] = {g->w1, g->b1, g->w2, g->b2};
  const int counts[4] = {N_IN * N_HID, N_HID, N_HID * N_OUT, N_OUT};
  if (sync == SYNC_PER_TENSOR) {
    for (int t = 0; t < 4; ++t) allreduce_mean(tensors[t], counts[t], world);
  } else if (sync == SYNC_ONE_BUFFER) {
    int at = 0;
    for (int t = 0; t < 4; ++t)
      memcpy(fused + at, tensors[t], counts[t] * sizeof(float)), at += counts[t];
    allreduce_mean(fused, at, world);
    at = 0;
    for (int t = 0; t < 4; ++t)
      memcpy(tensors[t], fused + at, counts[t] * sizeof(float)), at += counts[t];
  } else {
    MPI_Request requests[4];
    for (int t = 0; t < 4; ++t) {
      MPI_Iallreduce(MPI_IN_PLACE, tensors[t], counts[t], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                     &requests[t]);
    }
    MPI_Status statuses[4];
    MPI_Waitall(4, requests, statuses);
    for (int t = 0; t < 4; ++t) {
      for (int i = 0; i < counts[t]; ++i) tensors[t][i] /= (float)world;
    }
  }
}

// SGD with (optional) momentum: v = mu v + g; w -= lr v.
static void sgd(float* w, float* v, const float* g, size_t n, float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    w[i] -= lr * v[i];
  }
}

// ---- command line -----------------------------------------------------------

typedef struct {
  int steps, batch, log_every;
  float lr, momentum;
  Sync sync;
  long seed;    // 0: the default run
  int lr_drop;  // the step from which the learning rate is a tenth; 0: never
} Options;

static void usage(void) {
  fprintf(stderr,
          "usage: train_mlp [--steps N] [--batch B] [--lr LR] [--momentum MU] [--log-every K]\n"
          "                 [--sync S] [--seed S] [--lr-drop N]\n"
          "  --steps N      training steps (default 500)\n"
          "  --batch B      samples per rank per step (default 32)\n"
          "  --lr LR        learning rate (default 0.005)\n"
          "  --momentum MU  SGD momentum (default 0.9; 0 for plain SGD)\n"
          "  --log-every K  average and print the loss every K steps (default 10)\n"
          "  --seed S       another initialization and other batches (default 0; the\n"
          "                 held-out set stays the same)\n"
          "  --lr-drop N    a tenth of the learning rate from step N on (default: never)\n"
          "  --sync S       per-tensor (MPI_Allreduce per tensor, default), one-buffer (one\n"
          "                 MPI_Allreduce over all four, a fusion buffer), or iallreduce\n"
          "                 (MPI_Iallreduce per tensor, then MPI_Waitall)\n");
}

static int parse_options(int argc, char** argv, Options* o) {
  o->steps = 500;
  o->batch = 32;
  o->lr = 0.005f;
  o->momentum = 0.9f;
  o->log_every = 10;
  o->sync = SYNC_PER_TENSOR;
  o->seed = 0;
  o->lr_drop = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (i + 1 >= argc) return -1;
    const char* v = argv[++i];
    char* end = NULL;
    if (!strcmp(a, "--steps")) {
      o->steps = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--batch")) {
      o->batch = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--lr")) {
      o->lr = strtof(v, &end);
    } else if (!strcmp(a, "--momentum")) {
      o->momentum = strtof(v, &end);
    } else if (!strcmp(a, "--seed")) {
      o->seed = strtol(v, &end, 10);
    } else if (!strcmp(a, "--lr-drop")) {
      o->lr_drop = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--log-every")) {
      o->log_every = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--sync")) {
      if (!strcmp(v, "per-tensor")) {
        o->sync = SYNC_PER_TENSOR;
      } else if (!strcmp(v, "one-buffer")) {
        o->sync = SYNC_ONE_BUFFER;
      } else if (!strcmp(v, "iallreduce")) {
        o->sync = SYNC_IALLREDUCE;
      } else {
        return -1;
      }
      continue;
    } else {
      return -1;
    }
    if (end == v || *end != '\0') return -1;
  }
  if (o->steps < 1 || o->batch < 1 || o->log_every < 1 || !(o->lr > 0.0f) || o->seed < 0 ||
      o->lr_drop < 0 || !(o->momentum >= 0.0f && o->momentum < 1.0f))
    return -1;
  return 0;
}

// ---- main -------------------------------------------------------------------

// Held-out loss on the fixed evaluation set: sample s comes from its own seeded
// stream, so the set is the same for any world size; rank r takes s = r, r+W, ...
static double eval_loss(const Params* p, const Teacher* t, int rank, int world, float* x, int* y,
                        float* hid, float* logits, int cap) {
  double local = 0.0;
  int n = 0;
  for (int s = rank; s < N_EVAL; s += world) {
    Rng r = rng_for(kTagEval, (uint64_t)s, 0);
    y[n] = sample(t, &r, x + (size_t)n * N_IN);
    if (++n == cap) {
      local += forward(p, x, y, n, hid, logits, NULL, 0.0f);
      n = 0;
    }
  }
  if (n > 0) local += forward(p, x, y, n, hid, logits, NULL, 0.0f);
  double total = 0.0;
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total / N_EVAL;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  Options opt;
  const int rc = parse_options(argc, argv, &opt);
  if (rc != 0) {
    if (rank == 0) usage();
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }

  g_run_seed = (uint64_t)opt.seed;
  const int b = opt.batch;
  const int cap = b > 256 ? b : 256;  // rows of scratch; eval runs in chunks of 256
  Params p = params_alloc(), g = params_alloc(), v = params_alloc();
  params_init(&p);
  Teacher t = teacher_make();
  float* x = xcalloc((size_t)cap * N_IN, sizeof(float));
  int* y = xcalloc((size_t)cap, sizeof(int));
  float* hid = xcalloc((size_t)cap * N_HID, sizeof(float));
  float* dhid = xcalloc((size_t)b * N_HID, sizeof(float));
  float* logits = xcalloc((size_t)cap * N_OUT, sizeof(float));
  float* dlogits = xcalloc((size_t)b * N_OUT, sizeof(float));
  float* w2t = xcalloc((size_t)N_OUT * N_HID, sizeof(float));
  float* fused =
      xcalloc((size_t)N_IN * N_HID + N_HID + (size_t)N_HID * N_OUT + N_OUT, sizeof(float));
  const long n_params = (long)N_IN * N_HID + N_HID + (long)N_HID * N_OUT + N_OUT;

  if (rank == 0)
    printf(
        "train_mlp: %d ranks, MLP %d-%d-%d (%ld params), batch %d/rank, %d steps, lr %g, "
        "momentum %g\n",
        world, N_IN, N_HID, N_OUT, n_params, b, opt.steps, (double)opt.lr, (double)opt.momentum);

  const double initial_loss = eval_loss(&p, &t, rank, world, x, y, hid, logits, cap);
  if (rank == 0) printf("step %5d  eval_loss  %.4f\n", 0, initial_loss);

  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  double window = 0.0;
  int window_steps = 0;
  for (int step = 0; step < opt.steps; ++step) {
    // This rank's shard of the global batch, from a stream seeded by (rank, step).
    Rng r = rng_for(kTagTrain, (uint64_t)rank, (uint64_t)step);
    for (int i = 0; i < b; ++i) y[i] = sample(&t, &r, x + (size_t)i * N_IN);

    // Mean over the local shard; summing over ranks then dividing by the world
    // size gives the gradient of the mean loss over the global batch.
    window += forward(&p, x, y, b, hid, logits, dlogits, 1.0f / (float)b) / b;
    ++window_steps;
    backward(&p, x, hid, dlogits, b, dhid, w2t, &g);

    average_gradients(&g, opt.sync, fused, world);

    const float lr = opt.lr_drop > 0 && step >= opt.lr_drop ? opt.lr * 0.1f : opt.lr;
    if (rank == 0 && opt.lr_drop > 0 && step == opt.lr_drop) {
      printf("step %5d  learning rate %g (a tenth)\n", step, (double)lr);
    }
    sgd(p.w1, v.w1, g.w1, (size_t)N_IN * N_HID, lr, opt.momentum);
    sgd(p.b1, v.b1, g.b1, N_HID, lr, opt.momentum);
    sgd(p.w2, v.w2, g.w2, (size_t)N_HID * N_OUT, lr, opt.momentum);
    sgd(p.b2, v.b2, g.b2, N_OUT, lr, opt.momentum);

    if ((step + 1) % opt.log_every == 0 || step + 1 == opt.steps) {
      double local = window / window_steps, mean = 0.0;
      MPI_Allreduce(&local, &mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      mean /= world;
      if (rank == 0) {
        printf("step %5d  train_loss %.4f  (%.2f s)\n", step + 1, mean, MPI_Wtime() - t0);
        fflush(stdout);
      }
      if (!isfinite(mean)) {
        if (rank == 0) fprintf(stderr, "train_mlp: loss is not finite, stopping\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
      window = 0.0;
      window_steps = 0;
    }
  }

  const double wall = MPI_Wtime() - t0;  // training only, not the evaluation
  const double final_loss = eval_loss(&p, &t, rank, world, x, y, hid, logits, cap);
  if (rank == 0) {
    printf("final_loss=%.6f steps=%d params=%ld wall_s=%.3f\n", final_loss, opt.steps, n_params,
           wall);
    fflush(stdout);
  }

  params_free(&p);
  params_free(&g);
  params_free(&v);
  free(t.mu);
  free(x);
  free(y);
  free(hid);
  free(dhid);
  free(logits);
  free(dlogits);
  free(w2t);
  free(fused);
  MPI_Finalize();
  return 0;
}
