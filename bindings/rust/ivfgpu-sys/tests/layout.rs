//! Layout and value checks of the generated bindings against the real, linked library (not
//! against what clang computed when the bindings were generated): a struct field at the
//! wrong offset would hand out the wrong function pointer, and a wrong constant would map
//! to the wrong status string.

use core::ffi::CStr;
use core::mem::{align_of, size_of};
use ivfgpu_sys::*;

fn table() -> &'static ivf_api_v1 {
    let api = unsafe { ivf_get_api(IVF_ABI_VERSION as u32) };
    assert!(!api.is_null(), "ivf_get_api(IVF_ABI_VERSION) returned NULL");
    unsafe { &*api }
}

#[test]
fn table_size_and_version_match_the_library() {
    let api = table();
    assert_eq!(api.struct_size as usize, size_of::<ivf_api_v1>());
    assert_eq!(api.abi_version, IVF_ABI_VERSION as u32);
    assert_eq!(align_of::<ivf_api_v1>(), align_of::<*const ()>());
    // Two u32 then 38 function pointers: no padding on LP64 or ILP32.
    assert_eq!(size_of::<ivf_api_v1>(), 8 + 38 * size_of::<*const ()>());
    assert!(unsafe { ivf_get_api(0) }.is_null());
    assert!(unsafe { ivf_get_api(IVF_ABI_VERSION as u32 + 1) }.is_null());
    assert_eq!(unsafe { ivf_abi_version() }, IVF_ABI_VERSION as u32);
}

/// Every field of the table, read at the offset bindgen computed, must be the function the
/// library exports under that name.
#[test]
fn every_table_field_is_the_exported_function() {
    let api = table();
    macro_rules! same {
        ($field:ident, $func:ident) => {
            assert_eq!(
                api.$field.map(|f| f as *const () as usize),
                Some($func as *const () as usize),
                concat!("ivf_api_v1.", stringify!($field))
            );
        };
    }
    same!(version, ivf_version);
    same!(status_string, ivf_status_string);
    same!(last_error_message, ivf_last_error_message);
    same!(params_create, ivf_params_create);
    same!(params_free, ivf_params_free);
    same!(params_set_int, ivf_params_set_int);
    same!(params_get_int, ivf_params_get_int);
    same!(params_set_ptr, ivf_params_set_ptr);
    same!(create, ivf_create);
    same!(free, ivf_free);
    same!(train, ivf_train);
    same!(add, ivf_add);
    same!(reset, ivf_reset);
    same!(search, ivf_search);
    same!(ntotal, ivf_ntotal);
    same!(index_info, ivf_index_info);
    same!(save, ivf_save);
    same!(load, ivf_load);
    same!(serialize, ivf_serialize);
    same!(deserialize, ivf_deserialize);
    same!(save_faiss, ivf_save_faiss);
    same!(cuda_device_count, ivf_cuda_device_count);
    same!(param_bounds, ivf_param_bounds);
    same!(abi_version_fn, ivf_abi_version);
    same!(train_ex, ivf_train_ex);
    same!(add_ex, ivf_add_ex);
    same!(remove, ivf_remove);
    same!(update, ivf_update);
    same!(get, ivf_get);
    same!(count_ids, ivf_count_ids);
    same!(filter_create, ivf_filter_create);
    same!(filter_free, ivf_filter_free);
    same!(filter_bytes, ivf_filter_bytes);
    same!(params_set_progress, ivf_params_set_progress);
    same!(host_alloc, ivf_host_alloc);
    same!(host_free, ivf_host_free);
    same!(host_register, ivf_host_register);
    same!(host_unregister, ivf_host_unregister);
}

#[test]
fn status_constants_match_the_library() {
    let cases: [(ivf_status, &str); 14] = [
        (IVF_OK, "ok"),
        (IVF_ERR_INVALID_ARGUMENT, "invalid argument"),
        (IVF_ERR_OUT_OF_DEVICE_MEMORY, "out of device memory"),
        (IVF_ERR_OUT_OF_HOST_MEMORY, "out of host memory"),
        (IVF_ERR_CUDA, "CUDA error"),
        (IVF_ERR_UNSUPPORTED, "unsupported"),
        (IVF_ERR_INVALID_STATE, "invalid state"),
        (IVF_ERR_BUFFER_TOO_SMALL, "buffer too small"),
        (IVF_ERR_IO, "I/O error"),
        (IVF_ERR_CORRUPT_DATA, "corrupt data"),
        (IVF_ERR_VERSION_MISMATCH, "version mismatch"),
        (IVF_ERR_DEVICE_LOST, "device lost"),
        (IVF_ERR_INTERNAL, "internal error"),
        (IVF_ERR_CANCELLED, "cancelled"),
    ];
    for (code, text) in cases {
        let s = unsafe { CStr::from_ptr(ivf_status_string(code)) };
        assert_eq!(s.to_str().unwrap(), text, "status {code}");
    }
}

/// Key and enum constants as the library reads them back: a parameter object holds what was
/// set under the key the binding names, and the bounds query knows each key.
#[test]
fn parameter_keys_round_trip_through_the_library() {
    let mut p: *mut ivf_params = core::ptr::null_mut();
    assert_eq!(unsafe { ivf_params_create(&mut p) }, IVF_OK);
    let cases = [
        (IVF_PARAM_NLIST, 77),
        (IVF_PARAM_METRIC, IVF_METRIC_COSINE as i64),
        (IVF_PARAM_BACKEND, IVF_BACKEND_CPU as i64),
        (IVF_PARAM_KMEANS_ITERS, 3),
        (IVF_PARAM_SEED, 99),
        (IVF_PARAM_NPROBE, 5),
        (IVF_PARAM_MEMORY_KIND, IVF_MEMORY_HOST as i64),
        (IVF_PARAM_UNIQUE_IDS, 1),
        (IVF_PARAM_DEVICE_BUDGET, 8 << 30),
    ];
    for (key, value) in cases {
        assert_eq!(
            unsafe { ivf_params_set_int(p, key, value) },
            IVF_OK,
            "key {key}"
        );
        let mut got = -1;
        assert_eq!(unsafe { ivf_params_get_int(p, key, &mut got) }, IVF_OK);
        assert_eq!(got, value, "key {key}");
        let (mut lo, mut hi) = (0, 0);
        assert_eq!(unsafe { ivf_param_bounds(key, &mut lo, &mut hi) }, IVF_OK);
        assert!(lo <= value && value <= hi);
    }
    assert_eq!(
        unsafe { ivf_params_set_int(p, IVF_PARAM_METRIC, IVF_METRIC_COSINE as i64 + 1) },
        IVF_ERR_INVALID_ARGUMENT
    );
    unsafe { ivf_params_free(p) };
    unsafe { ivf_params_free(core::ptr::null_mut()) };
    unsafe { ivf_free(core::ptr::null_mut()) };
}

/// The progress callback type is what the library calls: it reaches the callback with the
/// stage and fraction, and a non-zero return cancels with IVF_ERR_CANCELLED.
#[test]
fn progress_callback_is_called_through_the_binding_type() {
    unsafe extern "C" fn cb(
        stage: ivf_progress_stage,
        fraction: f64,
        user: *mut core::ffi::c_void,
    ) -> i32 {
        let seen = unsafe { &mut *(user as *mut Vec<(i32, f64)>) };
        seen.push((stage, fraction));
        (stage == IVF_PROGRESS_LOAD) as i32
    }
    let mut seen: Vec<(i32, f64)> = Vec::new();
    let mut p: *mut ivf_params = core::ptr::null_mut();
    assert_eq!(unsafe { ivf_params_create(&mut p) }, IVF_OK);
    assert_eq!(
        unsafe { ivf_params_set_progress(core::ptr::null_mut(), Some(cb), core::ptr::null_mut()) },
        IVF_ERR_INVALID_ARGUMENT
    );
    let user = &mut seen as *mut Vec<(i32, f64)> as *mut core::ffi::c_void;
    assert_eq!(
        unsafe { ivf_params_set_progress(p, Some(cb), user) },
        IVF_OK
    );
    let bytes = [0u8; 16];
    let mut out: *mut ivf_index = core::ptr::null_mut();
    let status = unsafe { ivf_deserialize(bytes.as_ptr().cast(), bytes.len(), p, &mut out) };
    assert_eq!(
        status, IVF_ERR_CANCELLED,
        "the first report (0) cancels the load"
    );
    assert!(out.is_null());
    assert_eq!(seen, [(IVF_PROGRESS_LOAD, 0.0)]);
    // Cleared: the same call now reads the bytes (and refuses them).
    assert_eq!(
        unsafe { ivf_params_set_progress(p, None, core::ptr::null_mut()) },
        IVF_OK
    );
    let status = unsafe { ivf_deserialize(bytes.as_ptr().cast(), bytes.len(), p, &mut out) };
    assert_ne!(status, IVF_ERR_CANCELLED);
    assert_ne!(status, IVF_OK);
    assert_eq!(seen.len(), 1);
    unsafe { ivf_params_free(p) };
}
