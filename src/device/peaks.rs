//! The memory's ceilings, found when a device opens: the read-only, write-only and triad (two
//! reads, one write) peaks measured by kbench's own kernels (`kbench_peak_read`,
//! `kbench_peak_write`, `kbench_peak_triad` in kernels/timer.cu, each the best over a few launch
//! shapes), and the datasheet's peak read through NVML. The copy peak
//! (`Device::measure_copy_bandwidth`) is the fourth measured one.
//!
//! A case's "% peak" divides by the measured peak matching its traffic (`record::PeakKind`); the
//! physical ceiling a case may not pass (`DeviceFingerprint::ceiling_gbytes_per_s`) is the larger
//! of the datasheet's figure and CUDA's attribute one.
//!
//! A run's workers share what its first worker on a GPU measured (`share_peaks_in`): the peaks
//! and the host link take about a second, and a tune's re-measurements start a worker per case.

use std::path::PathBuf;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{driver_error, timer, Arg, Device, DeviceBuf, Dims, Kernel, Module};
use crate::vocab::DType;

/// The three kernels, loaded from the timer's module.
pub(super) struct PeakKernels {
    read: Kernel,
    write: Kernel,
    triad: Kernel,
}

/// The peaks `Device::measure_kernel_peaks` finds, in GB/s.
pub(super) struct KernelPeaks {
    pub read_gbytes_per_s: f64,
    pub write_gbytes_per_s: f64,
    pub triad_gbytes_per_s: f64,
}

/// What a device measured of its memory and host link, in GB/s, as a run's workers share it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct MeasuredPeaks {
    pub copy: f64,
    pub read: f64,
    pub write: f64,
    pub triad: f64,
    pub to_device: f64,
    pub to_host: f64,
}

/// The folder this process shares peaks through (see `share_peaks_in`).
static SHARED_PEAKS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes each device this process opens read the peaks another worker of the run measured on
/// the same GPU (by PCI bus id) from `dir`, or measure them and keep them there. The folder is
/// the run's own, so a later run measures afresh. Set once per process.
pub fn share_peaks_in(dir: PathBuf) {
    let _ = SHARED_PEAKS.set(dir);
}

/// Where the peaks of the GPU at `pci_bus_id` are kept for this run, if they are.
fn kept_at(pci_bus_id: &str) -> Option<PathBuf> {
    let name: String = (pci_bus_id.chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Some(SHARED_PEAKS.get()?.join(format!("peaks-{name}.json")))
}

/// The peaks another worker of the run kept for this GPU.
pub(super) fn kept(pci_bus_id: &str) -> Option<MeasuredPeaks> {
    let text = std::fs::read(kept_at(pci_bus_id)?).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Keeps `peaks` for the run's other workers on the same GPU.
pub(super) fn keep(pci_bus_id: &str, peaks: &MeasuredPeaks) {
    if let Some(path) = kept_at(pci_bus_id) {
        super::keep_for_other_workers(&path, peaks);
    }
}

/// Launch shapes tried for the read and write peaks, as (threads per block, blocks per SM): the
/// grid-stride loops run best at full occupancy (2048 threads an SM on an H100) and at a few
/// waves more.
const SHAPES: [(u32, u32); 5] = [(256, 8), (512, 4), (1024, 2), (128, 16), (256, 32)];
/// Block sizes tried for the triad peak, each over a grid of one 16-byte vector of each buffer
/// a thread.
const TRIAD_BLOCKS: [u32; 3] = [256, 512, 1024];
/// Untimed launches per shape before its timed ones.
const WARMUP_LAUNCHES: usize = 2;
/// Timed launches per shape: the shape's figure is their median.
const TIMED_LAUNCHES: usize = 20;

impl PeakKernels {
    pub(super) fn load(timer_module: &Module, device: &Device) -> Result<PeakKernels> {
        let kernel = |name: &str| -> Result<Kernel> {
            Ok(Kernel {
                function: timer_module.function(name).map_err(driver_error)?,
                stream: device.stream.clone(),
                name: name.to_string(),
            })
        };
        Ok(PeakKernels {
            read: kernel(timer::PEAK_READ_KERNEL)?,
            write: kernel(timer::PEAK_WRITE_KERNEL)?,
            triad: kernel(timer::PEAK_TRIAD_KERNEL)?,
        })
    }
}

impl Device {
    /// The read-only, write-only and triad peaks in GB/s: each the best, over its launch shapes
    /// (`SHAPES`; the triad's `TRIAD_BLOCKS`), of the median of `TIMED_LAUNCHES` launches over
    /// 1 GiB (or an eighth of the memory, if smaller; the triad reads one half and reads and
    /// writes the other), tens of GiB of traffic each (a few tens of milliseconds on an H100).
    pub(super) fn measure_kernel_peaks(&self, kernels: &PeakKernels) -> Result<KernelPeaks> {
        let bytes = (1usize << 30).min(self.fingerprint.total_memory_bytes as usize / 8) & !511;
        let buffer = DeviceBuf::zeroed(&self.stream, DType::I32, bytes / 4)?;
        let ptr = buffer.arg();
        let vectors = bytes as u64 / 16;
        // The buffer is zeroed and the write kernel writes zeros, so the read kernel's `sink`
        // (the buffer's first word) is never written and the buffer stays as it was.
        // SAFETY: (const int4* buffer, unsigned long long n16, int* sink) over `vectors`
        // 16-byte vectors of a live, 256-byte aligned allocation.
        let shapes = SHAPES.map(|(threads, blocks_per_sm)| {
            Dims::linear(self.fingerprint.sm_count * blocks_per_sm, threads, 0)
        });
        let read_gbytes_per_s = self.best_rate(bytes, &shapes, &mut |dims| unsafe {
            kernels.read.launch(dims, &[ptr, Arg::U64(vectors), ptr])
        })?;
        // SAFETY: (int4* buffer, unsigned long long n16, int value), as above.
        let write_gbytes_per_s = self.best_rate(bytes, &shapes, &mut |dims| unsafe {
            kernels
                .write
                .launch(dims, &[ptr, Arg::U64(vectors), Arg::I32(0)])
        })?;
        // The halves: a (read) and b (read and written), each `vectors / 2` vectors, b starting
        // 256-byte aligned (int32 element bytes / 8, bytes a multiple of 512). Each launch moves
        // 1.5 x `bytes`.
        let half = buffer.arg_at(bytes / 8)?;
        // SAFETY: (const int4* a, int4* b, unsigned long long n16) over two disjoint halves of a
        // live allocation, `vectors / 2` 16-byte vectors each.
        let triad_shapes = TRIAD_BLOCKS.map(|threads| {
            let blocks = (vectors / 2).div_ceil(threads as u64);
            Dims::linear(u32::try_from(blocks).unwrap_or(u32::MAX), threads, 0)
        });
        let triad_gbytes_per_s =
            self.best_rate(bytes / 2 * 3, &triad_shapes, &mut |dims| unsafe {
                kernels
                    .triad
                    .launch(dims, &[ptr, half, Arg::U64(vectors / 2)])
            })?;
        self.synchronize()?;
        drop(buffer);
        Ok(KernelPeaks {
            read_gbytes_per_s,
            write_gbytes_per_s,
            triad_gbytes_per_s,
        })
    }

    /// The best GB/s over `shapes` of `launch`, which moves `bytes` a launch.
    fn best_rate(
        &self,
        bytes: usize,
        shapes: &[Dims],
        launch: &mut dyn FnMut(Dims) -> Result<()>,
    ) -> Result<f64> {
        let mut best_gbytes_per_s = 0.0f64;
        for &dims in shapes {
            for _ in 0..WARMUP_LAUNCHES {
                launch(dims)?;
            }
            let mut times_s = Vec::with_capacity(TIMED_LAUNCHES);
            for _ in 0..TIMED_LAUNCHES {
                times_s.push(self.time_held_s(&mut || launch(dims))?);
            }
            times_s.sort_by(f64::total_cmp);
            let median_s = times_s[times_s.len() / 2];
            best_gbytes_per_s = best_gbytes_per_s.max(bytes as f64 / median_s / 1e9);
        }
        Ok(best_gbytes_per_s)
    }
}

/// The datasheet's memory bandwidth of the GPU at `pci_bus_id` in GB/s, through NVML: its
/// maximum memory clock x its bus width, 2 transfers per clock (HBM and GDDR as NVML reports
/// them). Err: why NVML could not say.
pub fn datasheet_gbytes_per_s(pci_bus_id: &str) -> Result<f64, String> {
    use nvml_wrapper::enum_wrappers::device::Clock;
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
    let device = nvml
        .device_by_pci_bus_id(pci_bus_id)
        .map_err(|e| format!("NVML does not know the GPU at {pci_bus_id}: {e}"))?;
    let clock_mhz = device
        .max_clock_info(Clock::Memory)
        .map_err(|e| format!("NVML has no maximum memory clock: {e}"))?;
    let bus_width_bits = device
        .memory_bus_width()
        .map_err(|e| format!("NVML has no memory bus width: {e}"))?;
    Ok(datasheet_rate(clock_mhz, bus_width_bits))
}

/// GB/s from a memory clock and a bus width: 2 transfers per clock.
fn datasheet_rate(clock_mhz: u32, bus_width_bits: u32) -> f64 {
    2.0 * clock_mhz as f64 * 1e6 * bus_width_bits as f64 / 8.0 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h100s_datasheet_clock_and_bus_give_its_3352_gbytes_per_s() {
        // An H100 SXM: NVML's maximum memory clock 2619 MHz, 5120-bit HBM3.
        assert!((datasheet_rate(2619, 5120) - 3352.32).abs() < 1e-6);
    }
}

#[cfg(test)]
mod sharing_tests {
    use super::*;

    #[test]
    fn peaks_kept_by_one_worker_are_read_by_the_next_on_the_same_gpu_alone() {
        let dir = tempfile::tempdir().unwrap();
        share_peaks_in(dir.path().to_path_buf());
        let measured = MeasuredPeaks {
            copy: 3036.0,
            read: 3217.0,
            write: 3210.0,
            triad: 3103.0,
            to_device: 55.1,
            to_host: 52.4,
        };
        assert_eq!(kept("00000000:1B:00.0"), None);
        keep("00000000:1B:00.0", &measured);
        assert_eq!(kept("00000000:1B:00.0"), Some(measured));
        assert_eq!(kept("00000000:2C:00.0"), None);
        // One file, no part left aside.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
