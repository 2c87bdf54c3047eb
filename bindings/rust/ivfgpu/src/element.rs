//! Element types of the rows given to or read from an index: `f32`, `u8`, `i8`, and the 16-bit
//! floating types as their bits ([`F16`], [`Bf16`]).

use crate::params::StorageType;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u8 {}
    impl Sealed for i8 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// An element type of vectors: `f32` (every index takes it), or the storage type of a compact
/// index (`u8`, `i8`, [`F16`], [`Bf16`]), read in place with no conversion. Rows of another
/// type are refused by the library (`InvalidArgument`). Sealed: implemented for those five
/// types only.
///
/// ```
/// use ivfgpu::{Backend, Index, IndexParams, SearchParams, StorageType};
///
/// // 64 vectors of u8: vector i is (i, i, i, i), stored as u8 (a quarter of f32's memory).
/// let data: Vec<u8> = (0..64u8).flat_map(|i| [i; 4]).collect();
/// let params = IndexParams::new().nlist(4).storage_type(StorageType::U8);
/// let index = Index::new(4, &params)?;
/// index.train_typed(&data)?;
/// index.add_typed(&data)?;
/// let found = index.search_typed(&[10u8, 10, 11, 11], 3, &SearchParams::new().nprobe(4))?;
/// assert_eq!(found.ids(), &[10, 11, 9]);
/// assert_eq!(found.distances(), &[2.0, 2.0, 10.0]); // exact integer distances
/// assert_eq!(index.get_typed::<u8>(&[7])?.get(0), Some(&[7u8; 4][..]));
/// # Ok::<(), ivfgpu::Error>(())
/// ```
pub trait Element: sealed::Sealed + Copy + Default + 'static {
    /// The C element type (`IVF_DTYPE_*`) of rows of this type.
    const STORAGE: StorageType;
}

impl Element for f32 {
    const STORAGE: StorageType = StorageType::F32;
}
impl Element for u8 {
    const STORAGE: StorageType = StorageType::U8;
}
impl Element for i8 {
    const STORAGE: StorageType = StorageType::I8;
}
impl Element for F16 {
    const STORAGE: StorageType = StorageType::F16;
}
impl Element for Bf16 {
    const STORAGE: StorageType = StorageType::BF16;
}

/// An IEEE 754 half-precision value as its bits (stable Rust has no `f16`): the rows of an
/// [`StorageType::F16`] index, read in place. [`F16::from_bits_slice`] views `&[u16]` bits
/// as rows without copying.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

/// A bfloat16 value as its bits (the upper half of an `f32`): the rows of a
/// [`StorageType::BF16`] index, read in place. [`Bf16::from_bits_slice`] views `&[u16]` bits
/// as rows without copying.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Bf16(pub u16);

impl F16 {
    /// `bits` as a slice of `F16`, without copying.
    pub fn from_bits_slice(bits: &[u16]) -> &[F16] {
        // SAFETY: F16 is a repr(transparent) u16: same size, alignment and validity.
        unsafe { core::slice::from_raw_parts(bits.as_ptr().cast(), bits.len()) }
    }
}

impl Bf16 {
    /// `bits` as a slice of `Bf16`, without copying.
    pub fn from_bits_slice(bits: &[u16]) -> &[Bf16] {
        // SAFETY: Bf16 is a repr(transparent) u16: same size, alignment and validity.
        unsafe { core::slice::from_raw_parts(bits.as_ptr().cast(), bits.len()) }
    }
    /// The value as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}
