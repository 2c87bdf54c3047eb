// The element-type axis: the types a list store can hold and input matrices can carry. Values
// match the ABI's ivf_dtype so the C layer converts by cast after a range check. Host code that
// must pick an implementation per type does it through dispatch_element_type, the one place
// that lists the types built in; adding a type means a new enumerator, its traits, and a case
// there (kernels are instantiated from the same list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "element_codec.hpp"
#include "errors.hpp"

namespace ivfgpu {

enum class ElementType : int32_t { F32 = 0, F16 = 1, U8 = 2, I8 = 3, BF16 = 4 };

inline bool is_integer(ElementType t) { return t == ElementType::U8 || t == ElementType::I8; }

template <class T>
struct ElementTag {
  using type = T;
};

inline std::size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::F32: return sizeof(float);
    case ElementType::F16: return 2;
    case ElementType::BF16: return 2;
    case ElementType::U8: return 1;
    case ElementType::I8: return 1;
  }
  fail(Errc::Unsupported, "unknown element type " + std::to_string(static_cast<int>(t)));
}

inline const char* element_name(ElementType t) {
  switch (t) {
    case ElementType::F32: return "f32";
    case ElementType::F16: return "f16";
    case ElementType::BF16: return "bf16";
    case ElementType::U8: return "uint8";
    case ElementType::I8: return "int8";
  }
  return "unknown";
}

// fn(ElementTag<T>{}) for the C++ type T of `t`.
template <class Fn>
decltype(auto) dispatch_element_type(ElementType t, Fn&& fn) {
  switch (t) {
    case ElementType::F32: return fn(ElementTag<float>{});
    case ElementType::F16: return fn(ElementTag<Half>{});
    case ElementType::BF16: return fn(ElementTag<BFloat16>{});
    case ElementType::U8: return fn(ElementTag<uint8_t>{});
    case ElementType::I8: return fn(ElementTag<int8_t>{});
  }
  fail(Errc::Unsupported, std::string("element type ") + element_name(t) + " is not built in");
}

}  // namespace ivfgpu
