package ivfgpu

// #include <ivfgpu/ivfgpu.h>
import "C"

import (
	"errors"
	"fmt"
)

// Code is a libivfgpu status code (IVF_ERR_* in ivfgpu.h). The constants below are sentinel
// errors: test an error with errors.Is(err, ivfgpu.ErrInvalidArgument).
type Code int32

// Error returns the library's short description of the code.
func (c Code) Error() string { return "ivfgpu: " + c.text() }

// text is the library's static description ("invalid argument", ...).
func (c Code) text() string { return C.GoString(C.ivf_status_string(C.ivf_status(c))) }

// Status codes, as sentinel errors.
const (
	ErrInvalidArgument   Code = C.IVF_ERR_INVALID_ARGUMENT     // bad argument, size, NaN/Inf
	ErrOutOfDeviceMemory Code = C.IVF_ERR_OUT_OF_DEVICE_MEMORY // a GPU allocation failed
	ErrOutOfHostMemory   Code = C.IVF_ERR_OUT_OF_HOST_MEMORY   // a host allocation failed
	ErrCUDA              Code = C.IVF_ERR_CUDA                 // a non-sticky CUDA error
	ErrUnsupported       Code = C.IVF_ERR_UNSUPPORTED          // unknown key or feature not built in
	ErrInvalidState      Code = C.IVF_ERR_INVALID_STATE        // e.g. add or search before train
	ErrBufferTooSmall    Code = C.IVF_ERR_BUFFER_TOO_SMALL     // a caller buffer is too short
	ErrIO                Code = C.IVF_ERR_IO                   // a file operation failed
	ErrCorruptData       Code = C.IVF_ERR_CORRUPT_DATA         // a file or buffer failed validation
	ErrVersionMismatch   Code = C.IVF_ERR_VERSION_MISMATCH     // format or ABI version not understood
	ErrDeviceLost        Code = C.IVF_ERR_DEVICE_LOST          // sticky CUDA error: close the index
	ErrInternal          Code = C.IVF_ERR_INTERNAL             // a library bug
	ErrCancelled         Code = C.IVF_ERR_CANCELLED            // a context or progress func stopped the call
)

var (
	// ErrOutOfMemory matches both ErrOutOfDeviceMemory and ErrOutOfHostMemory.
	ErrOutOfMemory = errors.New("ivfgpu: out of memory")
	// ErrClosed is returned by calls on an Index after Close, and by searches given a Filter
	// after its Close.
	ErrClosed = errors.New("ivfgpu: index is closed")
)

// closedError reports a closed object other than the index a call was made on; it matches
// ErrClosed.
type closedError struct{ op, what string }

func (e closedError) Error() string        { return "ivfgpu: " + e.op + ": " + e.what + " is closed" }
func (e closedError) Is(target error) bool { return target == ErrClosed }

// Error is a failed call: the operation, its status code and the library's message, which
// was copied in the same cgo call as the failing C function (so no other goroutine's call
// on that thread can have replaced it). Errors found by the Go side before calling C (a
// slice of the wrong length) have Code ErrInvalidArgument and a message of their own.
//
// A cancelled call (Code ErrCancelled) has a Cause: ctx.Err() of the Context method that was
// cancelled (context.Canceled or context.DeadlineExceeded), or the error a ProgressFunc
// returned. errors.Is and errors.As match the Cause as well as the Code, so
// errors.Is(err, context.Canceled) and errors.Is(err, ivfgpu.ErrCancelled) both hold.
type Error struct {
	Op      string // the method that failed, e.g. "Search"
	Code    Code   // the status code
	Message string // the library's description of this failure; may be empty
	Cause   error  // why a cancelled call was cancelled; nil otherwise
}

func (e *Error) Error() string {
	text := fmt.Sprintf("ivfgpu: %s: %s", e.Op, e.Code.text())
	if e.Message != "" {
		text += ": " + e.Message
	}
	if e.Cause != nil {
		text += ": " + e.Cause.Error()
	}
	return text
}

// Unwrap returns the Code, so that errors.Is(err, ivfgpu.ErrInvalidState) works.
func (e *Error) Unwrap() error { return e.Code }

// Is reports whether the error matches ErrOutOfMemory (either kind of out-of-memory) or,
// for a cancelled call, its Cause.
func (e *Error) Is(target error) bool {
	if target == ErrOutOfMemory && (e.Code == ErrOutOfDeviceMemory || e.Code == ErrOutOfHostMemory) {
		return true
	}
	return e.Cause != nil && errors.Is(e.Cause, target)
}

// As finds target in the Cause of a cancelled call (errors.As looks at the Code through
// Unwrap, and at the Cause through this method).
func (e *Error) As(target any) bool {
	return e.Cause != nil && errors.As(e.Cause, target)
}

func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Code: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}
