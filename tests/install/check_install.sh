#!/bin/sh
# The library used from outside the repository exactly as the README says, after
# `cmake --install` into a scratch prefix. No LD_LIBRARY_PATH unless the README asks for it
# (Rust, whose build scripts cannot add a run path): the programs must start as built.
#   check_install.sh install BUILD SRC WORK   install into WORK/prefix (the fixture)
#   check_install.sh c|cmake|rust|go|gowork BUILD SRC WORK
#       c      cc example.c $(pkg-config --cflags --libs ivfgpu), run
#       cmake  a project with find_package(ivfgpu) / ivfgpu::ivfgpu, run from its build tree
#       rust   a crate outside the workspace, ivfgpu = { path = ... }, cargo run
#       go     a module outside bindings/go with a replace line, go run
#       gowork the same through go.work instead of replace
set -eu
what="$1"; build="$2"; src="$3"; work="$4"
prefix="$work/prefix"
if [ "$what" = install ]; then
  rm -rf "$work"; mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" > "$work/install.log"
  echo "PASS: installed into $prefix"
  exit 0
fi
[ -d "$prefix" ] || { echo "no install under $prefix: run the install_prefix test first"; exit 1; }
unset LD_LIBRARY_PATH
libdir=$(dirname "$(ls -d "$prefix"/lib*/pkgconfig | head -1)")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
out="$work/$what"; rm -rf "$out"; mkdir -p "$out"
case "$what" in
  c)
    cc -std=c99 -Wall -Wextra -Werror -o "$out/example" "$src/examples/c/example.c" $(pkg-config --cflags --libs ivfgpu)
    "$out/example"
    ;;
  cmake)
    cat > "$out/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(ivfgpu REQUIRED)
add_executable(example $src/examples/c/example.c)
target_link_libraries(example PRIVATE ivfgpu::ivfgpu)
CM
    cmake -S "$out" -B "$out/build" -DCMAKE_PREFIX_PATH="$prefix" > "$out/cmake.log"
    cmake --build "$out/build" > "$out/build.log"
    "$out/build/example"
    ;;
  rust)
    mkdir -p "$out/src"
    cp "$src/examples/rust/src/main.rs" "$out/src/main.rs"
    cat > "$out/Cargo.toml" <<TOML
[package]
name = "consumer"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
ivfgpu = { path = "$src/bindings/rust/ivfgpu" }

[workspace]
TOML
    cd "$out"
    # As the README says for a custom prefix: PKG_CONFIG_PATH to build, LD_LIBRARY_PATH to run.
    CARGO_TARGET_DIR="$work/cargo-target" LD_LIBRARY_PATH="$libdir" cargo run --offline --quiet
    ;;
  go|gowork)
    cp "$src/examples/go/main.go" "$out/main.go"
    cd "$out"
    export GOFLAGS=-buildvcs=false GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off CGO_ENABLED=1
    export GOCACHE="$work/go-cache" GOPATH="$work/go-path"
    go mod init example.com/consumer > /dev/null 2>&1
    go mod edit -require=github.com/libivfgpu/libivfgpu/bindings/go@v0.0.0
    if [ "$what" = go ]; then
      go mod edit -replace=github.com/libivfgpu/libivfgpu/bindings/go="$src/bindings/go"
    else
      go work init . "$src/bindings/go"
    fi
    go run .
    ;;
  *) echo "unknown check $what"; exit 2 ;;
esac
echo "PASS: $what consumer built outside the repository and ran"
