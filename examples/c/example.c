/* The smallest useful libivfgpu program: build an index on generated data, search it, print
 * the neighbours. Compiled with -Wall -Wextra -Werror as C99. */
#include <ivfgpu/ivfgpu.h>

#include <stdio.h>
#include <stdlib.h>

#define DIM 16
#define N 2000
#define K 3

/* Print the failing call's status and message, then leave. */
static int check(ivf_status s, const char* what) {
  if (s != IVF_OK) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, ivf_status_string(s), ivf_last_error_message());
    exit(1);
  }
  return 0;
}

int main(void) {
  static float data[N * DIM];
  int64_t ids[2 * K];
  float dists[2 * K];
  ivf_params* params = NULL;
  ivf_index* index = NULL;
  int64_t backend = 0, i, j;

  srand(1);
  for (i = 0; i < N * DIM; ++i) data[i] = (float)rand() / (float)RAND_MAX;

  check(ivf_params_create(&params), "ivf_params_create");
  check(ivf_params_set_int(params, IVF_PARAM_NLIST, 32), "set nlist");
  check(ivf_params_set_int(params, IVF_PARAM_NPROBE, 4), "set nprobe");
  check(ivf_create(&index, DIM, params), "ivf_create");
  check(ivf_train(index, data, IVF_DTYPE_F32, N, DIM), "ivf_train");
  check(ivf_add(index, data, IVF_DTYPE_F32, N, DIM, NULL), "ivf_add");
  check(ivf_index_info(index, IVF_INFO_BACKEND, &backend), "ivf_index_info");

  /* Query with the first two stored vectors: each finds itself first, at distance 0. */
  check(ivf_search(index, NULL, data, IVF_DTYPE_F32, 2, DIM, K, ids, dists), "ivf_search");
  printf("libivfgpu %s, backend %s\n", ivf_version(), backend == IVF_BACKEND_CUDA ? "CUDA" : "CPU");
  for (i = 0; i < 2; ++i) {
    printf("query %d:", (int)i);
    for (j = 0; j < K; ++j) printf("  id %lld (d=%.4f)", (long long)ids[i * K + j], dists[i * K + j]);
    printf("\n");
  }
  ivf_free(index);
  ivf_params_free(params);
  return (ids[0] == 0 && ids[K] == 1) ? 0 : 2;
}
