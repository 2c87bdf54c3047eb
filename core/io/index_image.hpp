// What an index file holds: the host model and the build parameters the index was made with.
#pragma once

#include "../host_model.hpp"
#include "../types.hpp"

namespace ivfgpu::io {

struct IndexImage {
  HostModel model;
  // nlist, metric, nprobe and the training parameters come from the file; backend, device
  // and num_threads are the loader's choice and keep their defaults here.
  BuildParams params;
};

// Build parameters with which `image` is loaded: the file's, with the caller's backend,
// device and thread count.
BuildParams load_params(const IndexImage& image, const BuildParams& caller);

}  // namespace ivfgpu::io
