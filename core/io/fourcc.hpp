// Four-character codes as both formats store them: four bytes, first character first, read as
// a little-endian uint32.
#pragma once

#include <cstdint>
#include <string>

namespace ivfgpu::io {

constexpr uint32_t fourcc(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}

// Whether all four bytes are printable ASCII.
inline bool fourcc_printable(uint32_t h) {
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = static_cast<unsigned char>(h >> (8 * i));
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

// 'IwFl', with \xNN for unprintable bytes: safe to put in an error message.
inline std::string fourcc_text(uint32_t h) {
  static const char* hex = "0123456789abcdef";
  std::string s = "'";
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = static_cast<unsigned char>(h >> (8 * i));
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    }
  }
  return s + "'";
}

}  // namespace ivfgpu::io
