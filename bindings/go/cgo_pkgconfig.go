//go:build !ivfgpu_nopkgconfig

package ivfgpu

// Compiler and linker flags come from pkg-config (ivfgpu.pc, installed with the library; set
// PKG_CONFIG_PATH for a non-standard prefix). Without pkg-config, build with
// -tags ivfgpu_nopkgconfig (see cgo_nopkgconfig.go).

// #cgo pkg-config: ivfgpu
import "C"
