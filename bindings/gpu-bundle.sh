#!/bin/sh
# Packs the Rust and Go test suites and examples as prebuilt binaries, for a machine that has a
# GPU but no cargo or go. Build here against a CPU build tree (the binaries link the SONAME
# libivfgpu.so.1), carry OUT to the GPU machine, and run them there against its CUDA build:
#
#   bindings/gpu-bundle.sh BUILD_LIB_DIR OUT        # here; BUILD_LIB_DIR holds libivfgpu.so
#   OUT/run.sh GPU_LIB_DIR [cuda|auto|cpu]          # there; default backend: cuda
#
# run.sh runs the Rust integration and layout tests, the Go tests and Example functions (once
# plainly, once under the race detector) with IVFGPU_TEST_BACKEND set, so that every test
# index is GPU-backed, then both examples. Doc tests need rustdoc and are not included.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_LIB_DIR OUT" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
scratch="$out/.build"
mkdir -p "$out/rust" "$out/go" "$scratch"

export IVFGPU_LIB_DIR="$lib" CARGO_TARGET_DIR="$scratch/cargo" CARGO_NET_OFFLINE=true
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export GOCACHE="$scratch/go-cache" GOPATH="$scratch/go-path" GOPROXY=off GOTOOLCHAIN=local
export GOFLAGS=-buildvcs=false
pc="$scratch/pkgconfig"
mkdir -p "$pc"
printf 'libdir=%s\nincludedir=%s\n\nName: ivfgpu\nDescription: libivfgpu\nVersion: 0\nLibs: -L${libdir} -livfgpu\nCflags: -I${includedir}\n' \
  "$lib" "$here/../capi/include" > "$pc/ivfgpu.pc"
export PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# Rust: every test executable cargo reports, named after its crate or test file.
cargo test --offline --release --no-run --manifest-path "$here/rust/Cargo.toml" --workspace 2>&1 |
  sed -n 's/^ *Executable .* (\(.*\))$/\1/p' |
  while read -r path; do
    cp "$path" "$out/rust/$(basename "$path" | sed 's/-[0-9a-f]*$//')"
  done
cargo build --offline --release --quiet --manifest-path "$here/../examples/rust/Cargo.toml"
cp "$CARGO_TARGET_DIR/release/ivfgpu-example" "$out/example-rust"

# Go: the test binary, with and without the race detector, and the example.
(cd "$here/go" && go test -c -o "$out/go/ivfgpu.test" . && go test -race -c -o "$out/go/ivfgpu-race.test" .)
(cd "$here/../examples/go" && go build -o "$out/example-go" .)
rm -rf "$scratch"

cat > "$out/run.sh" <<'RUN'
#!/bin/sh
# usage: run.sh LIB_DIR [cuda|auto|cpu] -- runs the bundled binding tests against LIB_DIR.
set -u
if [ $# -lt 1 ] || [ ! -e "$1/libivfgpu.so.1" ]; then
  echo "usage: $0 LIB_DIR [cuda|auto|cpu]  (LIB_DIR holds libivfgpu.so.1)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$1" && pwd)
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export IVFGPU_TEST_BACKEND="${2:-cuda}"
failed=""
run() { echo "== $*"; "$@" || failed="$failed $(basename "$1")"; }
cd "$(mktemp -d)"
for t in "$here"/rust/*; do run "$t" --test-threads=4; done
run "$here/go/ivfgpu.test" -test.count=1 -test.v
run "$here/go/ivfgpu-race.test" -test.count=1
run "$here/example-rust"
run "$here/example-go"
if [ -n "$failed" ]; then echo "FAILED:$failed"; exit 1; fi
echo "all bundled binding tests passed (backend $IVFGPU_TEST_BACKEND, library $lib)"
RUN
chmod +x "$out/run.sh"
echo "bundle in $out ($(du -sh "$out" | cut -f1)); run: $out/run.sh LIB_DIR [cuda|auto|cpu]"
