// FAISS IndexIVFFlat files (faiss::write_index / read_index, FAISS's index_write.cpp and
// index_read.cpp; docs/file-format.md §FAISS summarises the layout): fourcc "IwFl", the index
// header, nlist and nprobe, the nested flat quantizer ("IxF2" L2, "IxFI" inner product), the
// direct map, then "ilar" array inverted lists.
#pragma once

#include <cstdint>

#include "byte_sink.hpp"
#include "byte_source.hpp"
#include "fourcc.hpp"
#include "index_image.hpp"

namespace ivfgpu::io {

namespace faiss {
inline constexpr uint32_t kIvfFlat = fourcc("IwFl");
inline constexpr int32_t kMetricInnerProduct = 0, kMetricL2 = 1;  // FAISS's MetricType values
// The "dummy" header fields FAISS writes (and ignores on reading).
inline constexpr int64_t kDummy = int64_t{1} << 20;
}  // namespace faiss

// Whether the first four bytes look like a FAISS index fourcc ('I' + three printable bytes).
bool looks_like_faiss(const unsigned char* first4);
// Reads a FAISS IndexIVFFlat file, cross-checking what FAISS does not (quantizer dimension and
// size, list sizes against ntotal, enum values). Other FAISS index types, quantizers and
// inverted-list kinds: Errc::Unsupported naming what was found; inconsistent fields:
// Errc::CorruptData.
IndexImage read_faiss(ByteSource& in);
// Writes the model as FAISS would write the same IndexIVFFlat (byte-identical layout).
// Metric cosine has no FAISS equivalent: Errc::Unsupported.
void write_faiss(const HostModel& model, const BuildParams& params, ByteSink& out);

}  // namespace ivfgpu::io
