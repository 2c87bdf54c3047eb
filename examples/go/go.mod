module github.com/libivfgpu/libivfgpu/examples/go

go 1.19

require github.com/libivfgpu/libivfgpu/bindings/go v0.0.0

// Build against the binding in this checkout; an application outside the repository
// requires a released version instead.
replace github.com/libivfgpu/libivfgpu/bindings/go => ../../bindings/go
