#!/bin/sh
# Installs the library into a scratch prefix and builds the C example against it twice: through
# pkg-config (ivfgpu.pc) and through CMake's find_package(ivfgpu) (ivfgpu::ivfgpu). Both
# programs must run.
set -eu
build="$1"; src="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -1); libdir=$(dirname "$libdir")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror -o "$work/example_pc" "$src/examples/c/example.c" $(pkg-config --cflags --libs ivfgpu)
LD_LIBRARY_PATH="$libdir" "$work/example_pc" >/dev/null
mkdir -p "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(ivfgpu REQUIRED)
add_executable(example_cmake $src/examples/c/example.c)
target_link_libraries(example_cmake PRIVATE ivfgpu::ivfgpu)
CM
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/consumer/build/example_cmake" >/dev/null
echo "PASS: installed package used through pkg-config and find_package(ivfgpu)"
