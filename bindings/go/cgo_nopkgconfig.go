//go:build ivfgpu_nopkgconfig

package ivfgpu

// The fallback when pkg-config is not available: `go build -tags ivfgpu_nopkgconfig` links
// -livfgpu from the compiler's default paths (e.g. /usr/local after `cmake --install`).
// For another prefix, add the paths through the environment, for example
//
//	CGO_CFLAGS=-I/opt/ivfgpu/include CGO_LDFLAGS=-L/opt/ivfgpu/lib go build -tags ivfgpu_nopkgconfig

// #cgo LDFLAGS: -livfgpu
import "C"
