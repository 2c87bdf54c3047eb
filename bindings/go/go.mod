module github.com/libivfgpu/libivfgpu/bindings/go

go 1.19
