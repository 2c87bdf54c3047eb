// The element-type axis: the types a list store can hold and input matrices can carry. Values
// match the ABI's ivf_dtype so the C layer converts by cast after a range check. Host code that
// must pick an implementation per type does it through dispatch_element_type, the one place
// that lists the types built in; adding a type means a new enumerator, its traits, and a case
// there (kernels are instantiated from the same list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.hpp"

namespace ivfgpu {

enum class ElementType : int32_t { F32 = 0 };

template <class T>
struct ElementTag {
  using type = T;
};

inline std::size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::F32: return sizeof(float);
  }
  fail(Errc::Unsupported, "unknown element type " + std::to_string(static_cast<int>(t)));
}

inline const char* element_name(ElementType t) {
  switch (t) {
    case ElementType::F32: return "f32";
  }
  return "unknown";
}

// fn(ElementTag<T>{}) for the C++ type T of `t`.
template <class Fn>
decltype(auto) dispatch_element_type(ElementType t, Fn&& fn) {
  switch (t) {
    case ElementType::F32: return fn(ElementTag<float>{});
  }
  fail(Errc::Unsupported, std::string("element type ") + element_name(t) + " is not built in");
}

}  // namespace ivfgpu
