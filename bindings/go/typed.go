package ivfgpu

import (
	"context"
	"reflect"
	"runtime"
	"unsafe"
)

// Element is a Go element type of vectors: float32 (every index takes it), uint8 or int8 (an
// index storing that type, WithStorageType(StorageUint8) or StorageInt8, also takes it, read
// in place with no conversion). Named types whose underlying type is one of these work too.
// f16 and bf16 indexes take float32 rows in Go.
//
// Methods cannot have type parameters in Go, so the typed calls are functions taking the
// index: TrainTyped, AddTyped, UpdateTyped, SearchTyped, SearchIntoTyped and GetTyped. Rows of
// a type that is neither float32 nor the index's storage type are refused by the library
// (ErrInvalidArgument).
type Element interface {
	~float32 | ~uint8 | ~int8
}

// storageOf is the StorageType of rows of T.
func storageOf[T Element]() StorageType {
	var zero T
	switch reflect.TypeOf(zero).Kind() {
	case reflect.Uint8:
		return StorageUint8
	case reflect.Int8:
		return StorageInt8
	default:
		return StorageF32
	}
}

func typedRows[T Element](data []T) hostRows {
	r := hostRows{dtype: storageOf[T](), len: len(data), keep: data}
	if len(data) > 0 {
		r.ptr = unsafe.Pointer(&data[0])
	}
	return r
}

// TrainTyped is TrainContext for rows of any Element type (a uint8 index trained on []uint8,
// say). ctx cancels it as TrainContext (context.Background() for none); it reads WithProgress.
func TrainTyped[T Element](ctx context.Context, ix *Index, data []T, opts ...Option) error {
	return ix.train(ctx, "TrainTyped", typedRows(data), opts)
}

// AddTyped is AddWithIDsContext for rows of any Element type; ids nil adds with sequential
// ids, as Add does.
func AddTyped[T Element](ctx context.Context, ix *Index, data []T, ids []int64, opts ...Option) error {
	return ix.add(ctx, "AddTyped", typedRows(data), ids, opts)
}

// UpdateTyped is Update (an upsert) for rows of any Element type.
func UpdateTyped[T Element](ix *Index, data []T, ids []int64) error {
	return ix.update("UpdateTyped", typedRows(data), ids)
}

// SearchTyped is SearchContext for queries of any Element type. Distances are float32 as
// always; integer queries against integer rows give exact integer distances, rounded once to
// float32.
func SearchTyped[T Element](ctx context.Context, ix *Index, queries []T, k int, opts ...Option) (Result, error) {
	return ix.searchAlloc(ctx, "SearchTyped", typedRows(queries), k, opts)
}

// SearchIntoTyped is SearchIntoContext for queries of any Element type.
func SearchIntoTyped[T Element](ctx context.Context, ix *Index, queries []T, k int, ids []int64, distances []float32, opts ...Option) error {
	return ix.searchInto(ctx, "SearchIntoTyped", typedRows(queries), k, ids, distances, opts)
}

// GetTyped is Get returning the stored rows as T: float32 (decoded), or the index's storage
// type (exactly the stored values); another type is refused (ErrInvalidArgument).
func GetTyped[T Element](ix *Index, ids []int64) (vectors []T, found []bool, err error) {
	vectors = make([]T, len(ids)*ix.dim+1) // +1: a valid pointer for no ids
	found, err = ix.get("GetTyped", ids, unsafe.Pointer(&vectors[0]), storageOf[T]())
	runtime.KeepAlive(vectors)
	if err != nil {
		return nil, nil, err
	}
	return vectors[:len(ids)*ix.dim], found, nil
}
