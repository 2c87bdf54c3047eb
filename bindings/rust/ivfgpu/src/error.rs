//! `Error`: the status code of a failed call, its kind, and the library's message for it.

use core::ffi::CStr;
use core::fmt;

use ivfgpu_sys as sys;

/// Result of every fallible call in this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// What went wrong, one variant per C status code. New codes may be added by later library
/// versions (hence `#[non_exhaustive]`); a code this crate does not know becomes
/// [`ErrorKind::Unknown`] and keeps its value in [`Error::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad argument: wrong length or dimension, k = 0, NaN/Inf in data, value out of bounds.
    InvalidArgument,
    /// A GPU allocation failed; nothing changed.
    OutOfDeviceMemory,
    /// A host allocation failed; nothing changed.
    OutOfHostMemory,
    /// A non-sticky CUDA or cuBLAS error.
    Cuda,
    /// Unknown key, data type or a feature not built into this library.
    Unsupported,
    /// The call is not allowed now, e.g. add or search before train.
    InvalidState,
    /// A buffer shorter than required.
    BufferTooSmall,
    /// Opening, reading, writing or renaming a file failed.
    Io,
    /// A file or buffer failed validation.
    CorruptData,
    /// A file format or ABI version this library does not understand.
    VersionMismatch,
    /// A sticky CUDA error: the index's GPU is unusable; drop the index.
    DeviceLost,
    /// A bug in the library; please report it with the message.
    Internal,
    /// A progress closure asked to stop (returned `ControlFlow::Break`); nothing changed.
    Cancelled,
    /// A status code this version of the crate does not know.
    Unknown,
}

impl ErrorKind {
    /// The kind of a C status code (`IVF_ERR_*`).
    pub fn from_code(code: sys::ivf_status) -> ErrorKind {
        match code {
            sys::IVF_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::IVF_ERR_OUT_OF_DEVICE_MEMORY => ErrorKind::OutOfDeviceMemory,
            sys::IVF_ERR_OUT_OF_HOST_MEMORY => ErrorKind::OutOfHostMemory,
            sys::IVF_ERR_CUDA => ErrorKind::Cuda,
            sys::IVF_ERR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::IVF_ERR_INVALID_STATE => ErrorKind::InvalidState,
            sys::IVF_ERR_BUFFER_TOO_SMALL => ErrorKind::BufferTooSmall,
            sys::IVF_ERR_IO => ErrorKind::Io,
            sys::IVF_ERR_CORRUPT_DATA => ErrorKind::CorruptData,
            sys::IVF_ERR_VERSION_MISMATCH => ErrorKind::VersionMismatch,
            sys::IVF_ERR_DEVICE_LOST => ErrorKind::DeviceLost,
            sys::IVF_ERR_INTERNAL => ErrorKind::Internal,
            sys::IVF_ERR_CANCELLED => ErrorKind::Cancelled,
            _ => ErrorKind::Unknown,
        }
    }

    /// True for both out-of-memory kinds (device and host).
    pub fn is_out_of_memory(self) -> bool {
        matches!(
            self,
            ErrorKind::OutOfDeviceMemory | ErrorKind::OutOfHostMemory
        )
    }
}

/// A failed call: its [`ErrorKind`], the C status code, and the library's message.
///
/// The message is copied from `ivf_last_error_message()` immediately after the failing C
/// call, on the same thread, before any other library call can overwrite it. Errors found by
/// this crate's own checks (slice lengths, before any C call) carry
/// `IVF_ERR_INVALID_ARGUMENT` and a message of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    code: sys::ivf_status,
    message: String,
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The C status code (`IVF_ERR_*`, always negative).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The library's description of this particular failure (may be empty).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An error detected on the Rust side, before calling into C.
    pub(crate) fn invalid_argument(message: String) -> Error {
        Error {
            kind: ErrorKind::InvalidArgument,
            code: sys::IVF_ERR_INVALID_ARGUMENT,
            message,
        }
    }

    /// The error of the C call that just returned `code` on this thread.
    fn from_last_call(code: sys::ivf_status) -> Error {
        // SAFETY: never NULL, valid until this thread's next ivf_ call, which cannot happen
        // before the copy below completes.
        let message = unsafe { CStr::from_ptr(sys::ivf_last_error_message()) }
            .to_string_lossy()
            .into_owned();
        Error {
            kind: ErrorKind::from_code(code),
            code,
            message,
        }
    }
}

/// Turns a C status into a `Result`. Call it directly on the C call's return value, so that
/// nothing runs between the call and the message copy.
pub(crate) fn check(code: sys::ivf_status) -> Result<()> {
    if code == sys::IVF_OK {
        Ok(())
    } else {
        Err(Error::from_last_call(code))
    }
}

/// The library's short, static description of a status code ("invalid argument", ...).
pub fn status_string(code: i32) -> &'static str {
    // SAFETY: static storage, never NULL.
    unsafe { CStr::from_ptr(sys::ivf_status_string(code)) }
        .to_str()
        .unwrap_or("unknown status")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = status_string(self.code);
        if self.message.is_empty() {
            write!(f, "ivfgpu: {what} ({})", self.code)
        } else {
            write!(f, "ivfgpu: {what} ({}): {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Error {}
