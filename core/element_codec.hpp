// Host encodings of the compact storage types (issue 11): f16 (IEEE binary16), bf16 (the top
// half of an f32), and their exact decodings. f32 -> f16/bf16 rounds to nearest, ties to even;
// f32 -> int8/uint8 accepts only integers in range (no silent scaling): encode_rows names the
// first row (and element) that is not. Decoding is exact for every type.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ivfgpu {

struct Half {
  uint16_t bits = 0;
  explicit operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  explicit operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline Half::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu, man = bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in f32
    const float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// Round to nearest, ties to even.
inline Half to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  Half h;
  if (abs >= 0x7f800000u) {  // inf / nan
    h.bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return h;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h.bits = static_cast<uint16_t>(sign | 0x7c00u);
    return h;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // value / 2^-24, rounded to nearest even, as an integer mantissa
    const float scaled = bits_float(abs) * 16777216.0f;  // exact: a power-of-two scaling
    const float r = std::nearbyint(scaled);              // default rounding: to nearest, ties even
    h.bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
    return h;
  }
  // Normal: drop 13 mantissa bits with round to nearest even.
  const uint32_t e = ((abs >> 23) - 112u) << 10;
  const uint32_t m = (abs >> 13) & 0x3ffu;
  uint32_t out = e | m;
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (out & 1u))) ++out;  // may carry into the exponent: correct
  h.bits = static_cast<uint16_t>(sign | out);
  return h;
}

inline BFloat16 to_bfloat16(float f) {
  const uint32_t u = float_bits(f);
  BFloat16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // nan: keep it a nan
    b.bits = static_cast<uint16_t>((u >> 16) | 0x40u);
    return b;
  }
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // ties to even; overflow goes to inf
  b.bits = static_cast<uint16_t>(rounded >> 16);
  return b;
}

// Every f16 value decoded, indexed by its bits (built once, on first use): loops that decode
// f16 rows read it instead of taking the branches of Half's conversion.
const float* half_table();

// Exact decoding for hot loops: float(v) for every type, f16 through half_table().
template <class T>
struct HostDecoder {
  float operator()(T v) const { return static_cast<float>(v); }
};
template <>
struct HostDecoder<Half> {
  const float* table = half_table();
  float operator()(Half h) const { return table[h.bits]; }
};

}  // namespace ivfgpu
