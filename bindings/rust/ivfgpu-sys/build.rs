//! Finds libivfgpu.so at build time. No libclang is needed here: the bindings are generated
//! ahead of time (generate.sh) and checked in.
//!
//! Search order:
//! 1. `IVFGPU_LIB_DIR`: the directory holding libivfgpu.so (e.g. a CMake build tree's `capi/`).
//! 2. `pkg-config --libs ivfgpu` (the `PKG_CONFIG` variable names another pkg-config binary;
//!    `PKG_CONFIG_PATH` is honoured as usual).
//! 3. The linker's default search path (e.g. /usr/lib after a system install).

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=IVFGPU_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib_dirs = match env::var("IVFGPU_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => {
            let so = Path::new(&dir).join("libivfgpu.so");
            if !so.exists() {
                println!("cargo:warning=IVFGPU_LIB_DIR={dir} holds no libivfgpu.so");
            }
            vec![dir]
        }
        _ => pkg_config_lib_dirs().unwrap_or_else(|why| {
            println!(
                "cargo:warning=libivfgpu not found through pkg-config ({why}); relying on the \
                 linker's default search path. Set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig \
                 (after `cmake --install build --prefix <prefix>`) or IVFGPU_LIB_DIR=<dir of \
                 libivfgpu.so>, and LD_LIBRARY_PATH to that directory to run."
            );
            Vec::new()
        }),
    };
    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    if let Some(first) = lib_dirs.first() {
        // Exposed to dependents' build scripts as DEP_IVFGPU_LIB_DIR (e.g. to set an rpath).
        println!("cargo:lib_dir={first}");
    }
    println!("cargo:rustc-link-lib=dylib=ivfgpu");
}

/// The `-L` directories of `pkg-config --libs ivfgpu`.
fn pkg_config_lib_dirs() -> Result<Vec<String>, String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&pkg_config)
        .args(["--libs", "ivfgpu"])
        .output()
        .map_err(|e| format!("cannot run {pkg_config}: {e}"))?;
    if !output.status.success() {
        // pkg-config explains itself over several lines; a cargo:warning is one line, so
        // join them or cargo drops everything after the first.
        let why = String::from_utf8_lossy(&output.stderr);
        return Err(why.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let libs = String::from_utf8(output.stdout).map_err(|e| e.to_string())?;
    Ok(libs
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-L"))
        .map(str::to_string)
        .collect())
}
