/* Run with the CUDA toolkit's libraries made unreachable (tests/capi/no_cuda_libs.sh): the
 * library must load, serve an AUTO index on the CPU, and refuse an explicit CUDA index with
 * IVF_ERR_UNSUPPORTED and a message that says why. */
#include <ivfgpu/ivfgpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    ivf_status s_ = (call);                                                                \
    if (s_ != IVF_OK) {                                                                    \
      fprintf(stderr, "FAIL: %s: %s (%s)\n", #call, ivf_status_string(s_), ivf_last_error_message()); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(void) {
  enum { DIM = 8, N = 400, K = 3 };
  static float data[N * DIM];
  int64_t ids[K];
  float dists[K];
  int64_t backend = -1;
  ivf_params* p = NULL;
  ivf_index* index = NULL;
  ivf_status s;
  int i;
  for (i = 0; i < N * DIM; ++i) data[i] = (float)((i * 7919) % 1000) / 1000.0f;
  CHECK(ivf_params_create(&p));
  CHECK(ivf_params_set_int(p, IVF_PARAM_NLIST, 4));
  CHECK(ivf_create(&index, DIM, p));
  CHECK(ivf_index_info(index, IVF_INFO_BACKEND, &backend));
  if (backend != IVF_BACKEND_CPU) {
    fprintf(stderr, "FAIL: AUTO chose backend %lld without cuBLAS\n", (long long)backend);
    return 1;
  }
  CHECK(ivf_train(index, data, IVF_DTYPE_F32, N, DIM));
  CHECK(ivf_add(index, data, IVF_DTYPE_F32, N, DIM, NULL));
  CHECK(ivf_search(index, NULL, data + 5 * DIM, IVF_DTYPE_F32, 1, DIM, K, ids, dists));
  if (ids[0] != 5 || dists[0] != 0.0f) {
    fprintf(stderr, "FAIL: the CPU search did not find the query itself\n");
    return 1;
  }
  ivf_free(index);
  index = NULL;
  CHECK(ivf_params_set_int(p, IVF_PARAM_BACKEND, IVF_BACKEND_CUDA));
  s = ivf_create(&index, DIM, p);
  if (s != IVF_ERR_UNSUPPORTED || index != NULL || strlen(ivf_last_error_message()) == 0) {
    fprintf(stderr, "FAIL: an explicit CUDA index gave %s\n", ivf_status_string(s));
    return 1;
  }
  printf("AUTO served on the CPU; CUDA refused: %s\n", ivf_last_error_message());
  ivf_params_free(p);
  return 0;
}
