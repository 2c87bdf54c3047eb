// ivf_get_api: the one symbol a dlopen host resolves. The table is static and append-only.
#include "ivfgpu/ivfgpu.h"

namespace {

const ivf_api_v1 kApiV1 = {
    sizeof(ivf_api_v1),
    1,
    ivf_version,
    ivf_status_string,
    ivf_last_error_message,
    ivf_params_create,
    ivf_params_free,
    ivf_params_set_int,
    ivf_params_get_int,
    ivf_params_set_ptr,
    ivf_create,
    ivf_free,
    ivf_train,
    ivf_add,
    ivf_reset,
    ivf_search,
    ivf_ntotal,
    ivf_index_info,
    ivf_save,
    ivf_load,
    ivf_serialize,
    ivf_deserialize,
    ivf_save_faiss,
    ivf_cuda_device_count,
    ivf_param_bounds,
    ivf_abi_version,
    ivf_train_ex,
    ivf_add_ex,
    ivf_remove,
    ivf_update,
    ivf_get,
    ivf_count_ids,
    ivf_filter_create,
    ivf_filter_free,
    ivf_filter_bytes,
    ivf_params_set_progress,
    ivf_host_alloc,
    ivf_host_free,
    ivf_host_register,
    ivf_host_unregister,
};

}  // namespace

extern "C" IVF_API const ivf_api_v1* ivf_get_api(uint32_t abi_version) {
  return abi_version == 1 ? &kApiV1 : nullptr;
}
