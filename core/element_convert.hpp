// Moving rows between f32 and the storage types (issue 11), on the host: encoding with the
// documented rounding and checks, exact decoding, and the non-finite check for float inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "element_type.hpp"
#include "host_model.hpp"
#include "matrix_view.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

// Host rows x (f32, or already of type `to`) as elements of `to`, in bytes. f32 -> f16/bf16
// rounds to nearest even (values beyond the type's range become +-inf and are refused: they
// cannot be searched); f32 -> uint8/int8 requires integers in range, else Errc::InvalidArgument
// naming the row and column. `what` prefixes messages ("add: data").
std::vector<unsigned char> encode_rows(const MatrixView& x, ElementType to, const char* what);
// The error encode_rows raises for element i (row i / dim) of value v that type `to` refuses.
[[noreturn]] void refuse_element(const char* what, int64_t i, int64_t dim, float v, ElementType to);
// count elements of `type` as f32 into out (exact for every type).
void decode_into(const void* rows, ElementType type, int64_t count, float* out);
// n x dim elements of `type` as f32 (exact for every type).
std::vector<float> decode_rows(const void* rows, ElementType type, int64_t n, int64_t dim);
// A model's rows in type `to` (encoded as encode_rows does: a refused value names its row).
void convert_model(HostModel& m, ElementType to);
// The first row of host rows x holding NaN or Inf (f32, f16, bf16; integers have none), or -1.
int64_t first_non_finite(const MatrixView& x);
// first_unusable_row (vector_ops.hpp) of host rows x of any type (integers: never; their norms
// cannot reach the bound). f16 and bf16 rows are decoded a block of rows at a time.
int64_t first_unusable(const MatrixView& x, bool bounded, bool* non_finite, float bound = kMaxSquaredNorm);
// Refuses (Errc::InvalidArgument, naming the first such row) host rows no distance is defined
// for: NaN or Inf anywhere, and under L2 and inner product a squared norm beyond
// kMaxSquaredNorm, whose distances could overflow float (cosine rows are normalised first, in
// double). Device rows pass: the backend checks them. `what` prefixes the message.
void reject_unusable_rows(const MatrixView& x, Metric metric, const char* what);
// The refusal reject_unusable_rows makes, for a row found elsewhere (device rows: the CUDA
// backend's check): Errc::InvalidArgument naming `what` row `row` and why.
[[noreturn]] void fail_unusable_row(const char* what, int64_t row, bool non_finite);

}  // namespace ivfgpu
