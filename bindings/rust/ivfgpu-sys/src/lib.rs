//! Raw FFI bindings to libivfgpu, the GPU IVF-Flat vector search library.
//!
//! Everything here is generated from `capi/include/ivfgpu/ivfgpu.h` by the `bindgen` tool
//! (see `generate.sh`) and checked in, so building needs no libclang. The header is the
//! reference for every function's ownership, thread-safety and status codes.
//!
//! C enumerations travel as `int32_t` typedefs with `#define`d values; they stay plain integer
//! types and constants here (`ivf_status`, `ivf_metric`, ... and `IVF_*`), never Rust enums:
//! a Rust enum holding a value the library adds later would be undefined behaviour.
//!
//! Use the `ivfgpu` crate for a safe API.
//!
//! Linking: `build.rs` looks in `IVFGPU_LIB_DIR`, then asks `pkg-config` for `ivfgpu`, then
//! falls back to the linker's default search path.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![allow(clippy::all)]

include!("bindings.rs");
