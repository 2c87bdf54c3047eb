/* The public header compiles as strict C99, included twice, and links from C. */
#include "ivfgpu/ivfgpu.h"
#include "ivfgpu/ivfgpu.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  ivf_params* params = NULL;
  ivf_index* index = NULL;
  int64_t ntotal = -1;
  if (ivf_abi_version() != IVF_ABI_VERSION) return 1;
  if (ivf_params_create(&params) != IVF_OK) return 2;
  if (ivf_params_set_int(params, IVF_PARAM_BACKEND, IVF_BACKEND_CPU) != IVF_OK) return 3;
  if (ivf_create(&index, 4, params) != IVF_OK) return 4;
  if (ivf_ntotal(index, &ntotal) != IVF_OK || ntotal != 0) return 5;
  if (ivf_create(NULL, 4, params) != IVF_ERR_INVALID_ARGUMENT) return 6;
  if (strlen(ivf_last_error_message()) == 0) return 7;
  ivf_free(index);
  ivf_params_free(params);
  printf("C99 header check passed (libivfgpu %s)\n", ivf_version());
  return 0;
}
