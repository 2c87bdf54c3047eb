/* A plugin host: loads libivfgpu with dlopen(RTLD_NOW | RTLD_LOCAL), resolves only
 * ivf_get_api, builds and searches an index through the function table, and dlcloses the
 * library again -- CYCLES times in one process. It checks the results of every cycle and,
 * after a warm-up, that neither the resident memory nor the number of open file descriptors
 * keeps growing from cycle to cycle.
 *
 *   ivfgpu_plugin_host LIBRARY [--cycles N] [--backend auto|cpu|cuda] [--max-rss-growth-kib K]
 *                      [--require-unload] [--require-static-cxx]
 *
 * --require-unload: the library must be unmapped after every dlclose (otherwise the cycles
 * would not test loading at all). --require-static-cxx: no shared libstdc++ may be mapped
 * while the library is loaded (this host is C, so one would have come with the library).
 *
 * Exit status: 0 pass, 1 failure, 77 skipped (--backend cuda without a CUDA device).
 * Only the header's types are used at compile time; the program does not link libivfgpu. */
#define _XOPEN_SOURCE 700

#include <ivfgpu/ivfgpu.h>

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIM 8
#define N 512
#define NLIST 8
#define K 3
#define NQ 4
#define EXIT_SKIP 77

typedef const ivf_api_v1* (*get_api_fn)(uint32_t);

static float g_data[N * DIM];

/* The examples' generator: a 64-bit LCG, values in [0, 1). */
static void generate(float* out, size_t count, uint64_t seed) {
  size_t i;
  for (i = 0; i < count; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    out[i] = (float)(seed >> 40) / (float)(1u << 24);
  }
}

static long rss_kib(void) {
  long pages_total = 0, pages_rss = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2) pages_rss = -1;
  fclose(f);
  return pages_rss < 0 ? -1 : pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void) {
  int count = 0;
  struct dirent* e;
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') ++count;
  closedir(d);
  return count - 1; /* the directory stream's own descriptor */
}

/* Whether a mapped file's path ends with suffix (exact: the whole path) or contains it. */
static int is_mapped(const char* pattern, int exact) {
  char line[PATH_MAX + 256];
  int found = 0;
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char* nl = strchr(line, '\n');
    size_t len = strlen(pattern);
    if (nl != NULL) *nl = '\0';
    if (exact)
      found = strlen(line) >= len && strcmp(line + strlen(line) - len, pattern) == 0;
    else
      found = strstr(line, pattern) != NULL;
  }
  fclose(f);
  return found;
}

static int g_shared_cxx_runtime = 0; /* a libstdc++.so was mapped while the library was */

#define CHECK(api, call)                                                                     \
  do {                                                                                       \
    ivf_status s_ = (call);                                                                  \
    if (s_ != IVF_OK) {                                                                      \
      fprintf(stderr, "cycle %d: %s failed: %s (%s)\n", cycle, #call, (api)->status_string(s_), \
              (api)->last_error_message());                                                  \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

/* One plugin lifetime: returns 0 on success, 1 on failure, EXIT_SKIP when CUDA is wanted but
 * absent. */
static int one_cycle(int cycle, const char* library, int64_t backend) {
  void* handle;
  void* sym;
  get_api_fn get_api;
  const ivf_api_v1* api;
  ivf_params* params = NULL;
  ivf_index* index = NULL;
  int64_t ids[NQ * K], ntotal = 0, i;
  float dists[NQ * K];
  int32_t devices = 0;
  int result = 0;

  handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "cycle %d: dlopen: %s\n", cycle, dlerror());
    return 1;
  }
  sym = dlsym(handle, "ivf_get_api");
  if (sym == NULL) {
    fprintf(stderr, "cycle %d: dlsym(ivf_get_api): %s\n", cycle, dlerror());
    dlclose(handle);
    return 1;
  }
  memcpy(&get_api, &sym, sizeof get_api); /* POSIX: object to function pointer */

  api = get_api(IVF_ABI_VERSION);
  if (api == NULL || api->abi_version != IVF_ABI_VERSION ||
      api->struct_size < sizeof(ivf_api_v1) || get_api(IVF_ABI_VERSION + 1) != NULL ||
      get_api(0) != NULL) {
    fprintf(stderr, "cycle %d: bad function table %p\n", cycle, (const void*)api);
    dlclose(handle);
    return 1;
  }
  if (api->abi_version_fn() != IVF_ABI_VERSION) {
    fprintf(stderr, "cycle %d: library ABI %u, header %d\n", cycle, api->abi_version_fn(),
            IVF_ABI_VERSION);
    dlclose(handle);
    return 1;
  }
  if (backend == IVF_BACKEND_CUDA && (api->cuda_device_count(&devices) != IVF_OK || devices == 0)) {
    dlclose(handle);
    return EXIT_SKIP;
  }

  /* Everything below goes through the table; each failure path still frees and dlcloses. */
  do {
    ivf_status s;
    if ((s = api->params_create(&params)) != IVF_OK ||
        (s = api->params_set_int(params, IVF_PARAM_NLIST, NLIST)) != IVF_OK ||
        (s = api->params_set_int(params, IVF_PARAM_BACKEND, backend)) != IVF_OK ||
        (s = api->params_set_int(params, IVF_PARAM_NUM_THREADS, 2)) != IVF_OK ||
        (s = api->params_set_int(params, IVF_PARAM_NPROBE, NLIST)) != IVF_OK ||
        (s = api->create(&index, DIM, params)) != IVF_OK ||
        (s = api->train(index, g_data, IVF_DTYPE_F32, N, DIM)) != IVF_OK ||
        (s = api->add(index, g_data, IVF_DTYPE_F32, N, DIM, NULL)) != IVF_OK ||
        (s = api->ntotal(index, &ntotal)) != IVF_OK ||
        (s = api->search(index, NULL, g_data, IVF_DTYPE_F32, NQ, DIM, K, ids, dists)) != IVF_OK) {
      fprintf(stderr, "cycle %d: %s (%s)\n", cycle, api->status_string(s), api->last_error_message());
      result = 1;
      break;
    }
    if (ntotal != N) {
      fprintf(stderr, "cycle %d: ntotal %lld\n", cycle, (long long)ntotal);
      result = 1;
    }
    /* Each stored vector finds itself first, at distance 0. */
    for (i = 0; i < NQ; ++i) {
      if (ids[i * K] != i || dists[i * K] != 0.0f) {
        fprintf(stderr, "cycle %d: query %lld found %lld at %g\n", cycle, (long long)i,
                (long long)ids[i * K], dists[i * K]);
        result = 1;
      }
    }
    if (is_mapped("/libstdc++.so", 0) == 1) g_shared_cxx_runtime = 1;
    /* An error through the table: a dimension mismatch, with a message. */
    s = api->search(index, NULL, g_data, IVF_DTYPE_F32, 1, DIM + 1, K, ids, dists);
    if (s != IVF_ERR_INVALID_ARGUMENT || api->last_error_message()[0] == '\0') {
      fprintf(stderr, "cycle %d: bad dimension gave %d '%s'\n", cycle, s, api->last_error_message());
      result = 1;
    }
  } while (0);
  api->free(index);
  api->params_free(params);

  if (dlclose(handle) != 0) {
    fprintf(stderr, "cycle %d: dlclose: %s\n", cycle, dlerror());
    return 1;
  }
  return result;
}

int main(int argc, char** argv) {
  const char* library = NULL;
  char real_library[PATH_MAX];
  int cycles = 1000, require_unload = 0, require_static_cxx = 0, unloaded = 0, cycle, a;
  int64_t backend = IVF_BACKEND_AUTO;
  long max_growth_kib = 4096, rss_warm = 0, rss_mid = 0, rss_end = 0;
  int fds_warm = 0, fds_max = 0;
  int warmup;

  for (a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--cycles") == 0 && a + 1 < argc) {
      cycles = atoi(argv[++a]);
    } else if (strcmp(argv[a], "--backend") == 0 && a + 1 < argc) {
      const char* b = argv[++a];
      backend = strcmp(b, "cpu") == 0 ? IVF_BACKEND_CPU
                : strcmp(b, "cuda") == 0 ? IVF_BACKEND_CUDA
                                         : IVF_BACKEND_AUTO;
    } else if (strcmp(argv[a], "--max-rss-growth-kib") == 0 && a + 1 < argc) {
      max_growth_kib = atol(argv[++a]);
    } else if (strcmp(argv[a], "--require-unload") == 0) {
      require_unload = 1;
    } else if (strcmp(argv[a], "--require-static-cxx") == 0) {
      require_static_cxx = 1;
    } else if (library == NULL && argv[a][0] != '-') {
      library = argv[a];
    } else {
      library = NULL;
      break;
    }
  }
  if (library == NULL || cycles < 20) {
    fprintf(stderr,
            "usage: %s LIBRARY [--cycles N>=20] [--backend auto|cpu|cuda] "
            "[--max-rss-growth-kib K] [--require-unload] [--require-static-cxx]\n",
            argv[0]);
    return 2;
  }
  warmup = cycles / 10;
  if (realpath(library, real_library) == NULL) {
    perror(library);
    return 1;
  }
  generate(g_data, sizeof g_data / sizeof g_data[0], 42);

  for (cycle = 0; cycle < cycles; ++cycle) {
    int r = one_cycle(cycle, library, backend);
    int fds;
    if (r == EXIT_SKIP) {
      printf("SKIPPED: no CUDA device\n");
      return EXIT_SKIP;
    }
    if (r != 0) return 1;
    if (is_mapped(real_library, 1) == 0) ++unloaded;
    fds = open_fds();
    if (cycle == warmup) {
      rss_warm = rss_kib();
      fds_warm = fds_max = fds;
    } else if (cycle == (cycles + warmup) / 2) {
      rss_mid = rss_kib();
    }
    if (fds > fds_max) fds_max = fds;
  }
  rss_end = rss_kib();

  printf("%d dlopen/dlclose cycles of %s\n", cycles, real_library);
  printf("library unmapped after dlclose: %d of %d cycles\n", unloaded, cycles);
  printf("shared libstdc++ mapped with the library: %s\n", g_shared_cxx_runtime ? "yes" : "no");
  printf("RSS KiB after warm-up %ld, midway %ld, end %ld (growth %ld, limit %ld)\n", rss_warm,
         rss_mid, rss_end, rss_end - rss_warm, max_growth_kib);
  printf("open fds after warm-up %d, max since %d, end %d\n", fds_warm, fds_max, open_fds());

  if (rss_warm <= 0 || fds_warm < 0) {
    fprintf(stderr, "FAIL: cannot read /proc/self\n");
    return 1;
  }
  if (fds_max != fds_warm || open_fds() != fds_warm) {
    fprintf(stderr, "FAIL: open file descriptors grew\n");
    return 1;
  }
  /* Steady growth: the total after warm-up, or the second half alone, beyond the limit. */
  if (rss_end - rss_warm > max_growth_kib || rss_end - rss_mid > max_growth_kib / 2) {
    fprintf(stderr, "FAIL: resident memory grows with the cycles\n");
    return 1;
  }
  if (require_unload && unloaded != cycles) {
    fprintf(stderr, "FAIL: the library stayed mapped after dlclose (RTLD_NODELETE or unique symbols?)\n");
    return 1;
  }
  if (require_static_cxx && g_shared_cxx_runtime) {
    fprintf(stderr, "FAIL: loading the library mapped a shared libstdc++ (not self-contained)\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
