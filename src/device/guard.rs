//! Guard zones: device buffers with a band of known bytes before and after them, so that a
//! kernel writing out of bounds is caught after the run ("wrote 12 bytes past the end of `y`")
//! instead of silently corrupting a neighbour or passing its check.
//!
//! A guarded buffer is an ordinary `DeviceBuf` (its pointer, copies and poison cover the buffer
//! alone), allocated with `GUARD_BYTES` more on each side filled with `GUARD_BYTE`;
//! `DeviceBuf::check_guards` copies both zones back and reads them with `check_zones`, a pure
//! function over host bytes. Only writes are caught, and only those that land in a zone: a stray
//! write further out, or one that happens to store `GUARD_BYTE` itself, is not seen
//! (compute-sanitizer sees those).

use anyhow::{Context, Result};
use cudarc::driver::{result as driver_result, DevicePtr};

use super::{driver_error, Device, DeviceBuf, Gpu};
use crate::vocab::DType;

/// Each zone's size. 256 bytes keeps the buffer itself 256-byte aligned (the driver's
/// allocations are), so vector loads and the alignment a kernel assumes do not change.
pub const GUARD_BYTES: usize = 256;

/// What each guard byte holds: none of the usual written values (0, 0xFF of -1 or f64 poison,
/// the bytes of 1.0f or of POISON_I32), so an overrun with any of those shows.
pub const GUARD_BYTE: u8 = 0xDB;

/// Which zone: before the buffer's first byte, or after its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

/// What a kernel did to one guard zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardDamage {
    pub side: Side,
    /// Bytes that no longer hold `GUARD_BYTE` (a lower bound on the bytes written).
    pub bytes_changed: usize,
    /// How far from the buffer the closest changed byte is, counted from 0: byte 0 after the
    /// buffer is the one right after its last byte; byte 0 before it, the one right before its
    /// first.
    pub nearest_offset: usize,
    /// Whether the zone's outer byte changed too: the writes may go on beyond the zone.
    pub reaches_outer_edge: bool,
}

/// A buffer whose guard zones were written: the case's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(buffer, damage))]
pub struct OutOfBounds {
    pub buffer: String,
    /// One per damaged zone, `Before` first.
    pub damage: Vec<GuardDamage>,
}

fn describe(buffer: &str, damage: &[GuardDamage]) -> String {
    let parts: Vec<String> = damage
        .iter()
        .map(|d| {
            let (place, direction) = match d.side {
                Side::Before => ("before the start of", "before"),
                Side::After => ("past the end of", "after"),
            };
            let mut text = format!(
                "wrote {} {place} `{buffer}` (nearest at byte {} {direction} it",
                plural_bytes(d.bytes_changed),
                d.nearest_offset
            );
            if d.reaches_outer_edge {
                text += &format!(
                    "; up to the guard zone's edge, {GUARD_BYTES} bytes out: maybe further"
                );
            }
            text + ")"
        })
        .collect();
    parts.join("; ")
}

fn plural_bytes(count: usize) -> String {
    if count == 1 {
        "1 byte".to_string()
    } else {
        format!("{count} bytes")
    }
}

/// Reads one zone copied back from the device; `None` when every byte still holds
/// `GUARD_BYTE`. `zone[0]` is the zone's lowest address, for either side.
pub fn find_damage(zone: &[u8], side: Side) -> Option<GuardDamage> {
    let changed: Vec<usize> = (zone.iter().enumerate())
        .filter(|&(_, &byte)| byte != GUARD_BYTE)
        .map(|(index, _)| index)
        .collect();
    let (&lowest, &highest) = (changed.first()?, changed.last()?);
    let last = zone.len() - 1;
    // Before the buffer, the nearest byte is the highest address; after it, the lowest.
    let (nearest_offset, reaches_outer_edge) = match side {
        Side::Before => (last - highest, lowest == 0),
        Side::After => (lowest, highest == last),
    };
    Some(GuardDamage {
        side,
        bytes_changed: changed.len(),
        nearest_offset,
        reaches_outer_edge,
    })
}

/// Checks both zones of buffer `name` (each copied back whole, lowest address first).
pub fn check_zones(name: &str, before: &[u8], after: &[u8]) -> Result<(), OutOfBounds> {
    let damage: Vec<GuardDamage> = [(before, Side::Before), (after, Side::After)]
        .into_iter()
        .filter_map(|(zone, side)| find_damage(zone, side))
        .collect();
    if damage.is_empty() {
        Ok(())
    } else {
        Err(OutOfBounds {
            buffer: name.to_string(),
            damage,
        })
    }
}

impl Device {
    /// A zeroed buffer of `len` elements with a guard zone on each side (see the module). Unlike
    /// `alloc`, an empty one stays empty: a kernel writing its element 0 is caught.
    pub fn alloc_guarded(&self, dtype: DType, len: usize) -> Result<DeviceBuf> {
        let region_bytes = len
            .checked_mul(dtype.size_bytes() as usize)
            .and_then(|bytes| bytes.checked_add(2 * GUARD_BYTES))
            .ok_or_else(|| {
                anyhow::anyhow!("{len} elements of {dtype} overflow the address space")
            })?;
        let slice = self
            .stream
            .alloc_zeros::<u8>(region_bytes)
            .map_err(driver_error)?;
        let base = slice.device_ptr(&self.stream).0;
        let buf = DeviceBuf {
            ptr: base + GUARD_BYTES as u64,
            bytes: slice,
            guard_bytes: GUARD_BYTES,
            dtype,
            len,
            stream: self.stream.clone(),
        };
        buf.fill_guards()?;
        Ok(buf)
    }
}

impl Gpu<'_> {
    /// A zeroed buffer with guard zones (see `Device::alloc_guarded`).
    pub fn alloc_guarded(&self, dtype: DType, len: usize) -> Result<DeviceBuf> {
        self.device.alloc_guarded(dtype, len)
    }
}

impl DeviceBuf {
    /// Each guard zone's size: `GUARD_BYTES`, or 0 for a buffer made without them.
    pub fn guard_bytes(&self) -> usize {
        self.guard_bytes
    }

    /// Queues the refilling of both guard zones with `GUARD_BYTE` (after a damaged run, to run
    /// again).
    pub fn fill_guards(&self) -> Result<()> {
        if self.guard_bytes == 0 {
            return Ok(());
        }
        let zones = [
            self.ptr - self.guard_bytes as u64,
            self.ptr + self.region_bytes() as u64,
        ];
        for start in zones {
            // SAFETY: both zones lie within this live allocation: `guard_bytes` before the
            // buffer and `guard_bytes` after it.
            unsafe {
                driver_result::memset_d8_async(
                    start,
                    GUARD_BYTE,
                    self.guard_bytes,
                    self.stream.cu_stream(),
                )
            }
            .map_err(driver_error)?;
        }
        Ok(())
    }

    /// Waits for the stream, copies both guard zones back and checks them: the error is an
    /// `OutOfBounds` naming the buffer `name` (or the driver's, if the copy fails). A buffer
    /// made without guards always passes.
    pub fn check_guards(&self, name: &str) -> Result<()> {
        if self.guard_bytes == 0 {
            return Ok(());
        }
        let guard = self.guard_bytes;
        let after_start = guard + self.region_bytes();
        let mut before = vec![0u8; guard];
        let mut after = vec![0u8; guard];
        let copy = |from: usize, into: &mut Vec<u8>| {
            let zone = self.bytes.slice(from..from + guard);
            self.stream.memcpy_dtoh(&zone, into).map_err(driver_error)
        };
        copy(0, &mut before)
            .and_then(|()| copy(after_start, &mut after))
            .and_then(|()| self.stream.synchronize().map_err(driver_error))
            .with_context(|| format!("copying the guard zones of `{name}` back"))?;
        check_zones(name, &before, &after)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone_with(changes: &[(usize, u8)]) -> Vec<u8> {
        let mut zone = vec![GUARD_BYTE; GUARD_BYTES];
        for &(index, byte) in changes {
            zone[index] = byte;
        }
        zone
    }

    #[test]
    fn untouched_zones_pass() {
        let zone = zone_with(&[]);
        assert_eq!(check_zones("y", &zone, &zone), Ok(()));
    }

    #[test]
    fn writes_past_the_end_are_counted_from_the_first_byte_after_it() {
        // Three floats written at elements n + 1 .. n + 4: bytes 4 to 15 after the end.
        let changes: Vec<(usize, u8)> = (4..16).map(|i| (i, 0)).collect();
        let err = check_zones("y", &zone_with(&[]), &zone_with(&changes)).unwrap_err();
        assert_eq!(
            err.damage,
            [GuardDamage {
                side: Side::After,
                bytes_changed: 12,
                nearest_offset: 4,
                reaches_outer_edge: false
            }]
        );
        assert_eq!(
            err.to_string(),
            "wrote 12 bytes past the end of `y` (nearest at byte 4 after it)"
        );
    }

    #[test]
    fn writes_before_the_start_are_counted_back_from_the_first_element() {
        // One f64 at element -1: the 8 bytes right before the buffer, the zone's highest.
        let changes: Vec<(usize, u8)> = (GUARD_BYTES - 8..GUARD_BYTES).map(|i| (i, 1)).collect();
        let err = check_zones("x", &zone_with(&changes), &zone_with(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "wrote 8 bytes before the start of `x` (nearest at byte 0 before it)"
        );
    }

    #[test]
    fn both_sides_and_the_outer_edge_are_reported() {
        let before = zone_with(&[(0, 0), (10, 0)]);
        let after = zone_with(&[(0, 7), (GUARD_BYTES - 1, 7)]);
        let err = check_zones("buf", &before, &after).unwrap_err();
        assert_eq!(err.damage.len(), 2);
        assert_eq!(
            err.to_string(),
            "wrote 2 bytes before the start of `buf` (nearest at byte 245 before it; up to the \
             guard zone's edge, 256 bytes out: maybe further); wrote 2 bytes past the end of \
             `buf` (nearest at byte 0 after it; up to the guard zone's edge, 256 bytes out: \
             maybe further)"
        );
    }

    #[test]
    fn one_changed_byte_reads_as_one_byte() {
        let damage = find_damage(&zone_with(&[(3, 0)]), Side::After).unwrap();
        assert_eq!((damage.bytes_changed, damage.nearest_offset), (1, 3));
        let err = check_zones("z", &zone_with(&[]), &zone_with(&[(3, 0)])).unwrap_err();
        assert!(err.to_string().starts_with("wrote 1 byte past"), "{err}");
    }

    #[test]
    fn the_guard_byte_is_none_of_the_usual_written_bytes() {
        let usual: Vec<u8> = [0u32, u32::MAX, 1.0f32.to_bits(), f32::NAN.to_bits()]
            .into_iter()
            .chain([crate::vocab::POISON_I32 as u32])
            .flat_map(u32::to_le_bytes)
            .chain(1.0f64.to_le_bytes())
            .collect();
        assert!(!usual.contains(&GUARD_BYTE));
        assert_eq!(GUARD_BYTES % 256, 0, "keeps the buffer 256-byte aligned");
    }
}
