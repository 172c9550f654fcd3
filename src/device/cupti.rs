//! The second timer: CUPTI's activity records give each kernel's own start and end on the GPU's
//! clock, independent of the events around a sample. Optional: where libcupti cannot be loaded,
//! or another CUPTI client holds it (Nsight Compute, Nsight Systems), kbench says why and times
//! with events alone.
//!
//! CUPTI hands records over in buffers through two C callbacks; they land in `RECORDS`, and
//! `take_span` reads what the last sample's kernels did.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::CStr;
use std::sync::Mutex;

use cudarc::cupti::{result::activity, sys};
use cudarc::driver::sys::CUcontext;

/// One kernel's run as CUPTI saw it.
#[derive(Debug, Clone, PartialEq)]
struct KernelRecord {
    name: String,
    start_ns: u64,
    end_ns: u64,
}

static RECORDS: Mutex<Vec<KernelRecord>> = Mutex::new(Vec::new());

const BUFFER_BYTES: usize = 4 << 20;
const BUFFER_ALIGN: usize = 8;

// CUDA 13.0's CUPTI writes CUpti_ActivityKernel10 for CONCURRENT_KERNEL records; later versions
// append fields, so the fields read here keep their offsets (checked against Kernel9 below).
type KernelRec = sys::CUpti_ActivityKernel10;
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(KernelRec, start) == offset_of!(sys::CUpti_ActivityKernel9, start));
    assert!(offset_of!(KernelRec, end) == offset_of!(sys::CUpti_ActivityKernel9, end));
    assert!(offset_of!(KernelRec, name) == offset_of!(sys::CUpti_ActivityKernel9, name));
};

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    // SAFETY: a valid non-zero layout; a null result tells CUPTI to drop records.
    let p = alloc(Layout::from_size_align_unchecked(
        BUFFER_BYTES,
        BUFFER_ALIGN,
    ));
    *buffer = p;
    *size = if p.is_null() { 0 } else { BUFFER_BYTES };
    *max_records = 0;
}

unsafe extern "C" fn buffer_completed(
    _ctx: CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    // Unwinding out of an extern "C" function aborts the process: catch everything.
    let _ = std::panic::catch_unwind(|| {
        let mut records = Vec::new();
        let mut rec: *mut sys::CUpti_Activity = std::ptr::null_mut();
        // SAFETY: CUPTI walks its own buffer; each record starts with its kind, and kernel
        // records are (at least) a KernelRec, read unaligned since they are packed.
        while activity::get_next_record(buffer, valid, &mut rec).is_ok() {
            let kind = (*rec).kind;
            if kind == sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                || kind == sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL
            {
                let k = std::ptr::read_unaligned(rec as *const KernelRec);
                let name = if k.name.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(k.name).to_string_lossy().into_owned()
                };
                records.push(KernelRecord {
                    name,
                    start_ns: k.start,
                    end_ns: k.end,
                });
            }
        }
        if let Ok(mut all) = RECORDS.lock() {
            all.extend(records);
        }
    });
    if !buffer.is_null() {
        dealloc(
            buffer,
            Layout::from_size_align_unchecked(BUFFER_BYTES, BUFFER_ALIGN),
        );
    }
}

/// Kernel activity recording, from `start` until dropped.
pub struct KernelTracer {
    subscriber: sys::CUpti_SubscriberHandle,
}

impl KernelTracer {
    /// Starts recording kernels, or says why it cannot.
    pub fn start() -> Result<KernelTracer, String> {
        load_library()?;
        let mut subscriber: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: the library is loaded; `subscriber` receives a handle. Fails when another CUPTI
        // client (a profiler) is attached.
        unsafe { cudarc::cupti::result::subscribe(&mut subscriber, None, std::ptr::null_mut()) }
            .map_err(|e| format!("CUPTI unavailable (a profiler attached?): {:?}", e.0))?;
        let enabled = activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
            .and_then(|()| {
                activity::enable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            });
        if let Err(e) = enabled {
            // SAFETY: the handle came from `subscribe` above.
            let _ = unsafe { cudarc::cupti::result::unsubscribe(subscriber) };
            return Err(format!("CUPTI activity recording failed: {:?}", e.0));
        }
        Ok(KernelTracer { subscriber })
    }

    /// The GPU time from the first start to the last end of the kernels recorded since the last
    /// call, leaving out those named in `exclude` (the timer's own); None if none ran. Call after
    /// the sample's work has completed (its stop event waited on).
    pub fn take_span(&self, exclude: &[&str]) -> Result<Option<f64>, String> {
        activity::flush_all(0).map_err(|e| format!("cuptiActivityFlushAll: {:?}", e.0))?;
        let records = std::mem::take(&mut *RECORDS.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(kernel_span_s(&records, exclude))
    }
}

impl KernelTracer {
    /// Stops recording until `resume`, dropping what was recorded: the range profiler's runs
    /// belong to no sample. (Left recording through them, CUPTI 13.0 delivered no kernel record
    /// afterwards on an H100: the profiler's replayed kernels leave records that never complete,
    /// and an unforced flush waits for them.)
    pub fn pause(&self) -> Result<(), String> {
        activity::flush_all(1) // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
            .and_then(|()| {
                activity::disable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            })
            .map_err(|e| format!("pausing CUPTI's activity records: {:?}", e.0))?;
        RECORDS.lock().unwrap_or_else(|e| e.into_inner()).clear();
        Ok(())
    }

    pub fn resume(&self) -> Result<(), String> {
        activity::enable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            .map_err(|e| format!("resuming CUPTI's activity records: {:?}", e.0))
    }
}

impl Drop for KernelTracer {
    fn drop(&mut self) {
        let _ = activity::flush_all(1);
        let _ = activity::disable(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        // SAFETY: the handle came from `subscribe`.
        let _ = unsafe { cudarc::cupti::result::unsubscribe(self.subscriber) };
    }
}

/// From the first start to the last end of the complete records not named in `exclude`.
fn kernel_span_s(records: &[KernelRecord], exclude: &[&str]) -> Option<f64> {
    let timed = records.iter().filter(|r| {
        !exclude.contains(&r.name.as_str()) && r.end_ns >= r.start_ns && r.start_ns > 0
    });
    let start = timed.clone().map(|r| r.start_ns).min()?;
    let end = timed.map(|r| r.end_ns).max()?;
    Some((end - start) as f64 * 1e-9)
}

/// Loads libcupti: by its usual names (cudarc's search), else from where CUDA installs and pip
/// packages keep it (see `libs`).
pub(super) fn load_library() -> Result<(), String> {
    let mut patterns = vec![
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*".to_string(),
        "/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so*".to_string(),
        "/usr/local/cuda/lib64/libcupti.so*".to_string(),
    ];
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        let home = home.to_string_lossy();
        patterns.insert(0, format!("{home}/extras/CUPTI/lib64/libcupti.so*"));
    }
    for site in super::libs::python_site_dirs() {
        patterns.push(format!("{site}nvidia/cu13/lib/libcupti.so*"));
        patterns.push(format!("{site}nvidia/cuda_cupti/lib/libcupti.so*"));
        patterns.push(format!("{site}nvidia/*/lib/libcupti.so*"));
    }
    super::libs::load(&super::libs::Search {
        label: "CUPTI (libcupti.so)",
        present: sys::is_culib_present,
        env_var: "KBENCH_CUPTI_LIB",
        patterns,
        companions: &[],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, start_ns: u64, end_ns: u64) -> KernelRecord {
        KernelRecord {
            name: name.into(),
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn the_span_runs_from_the_first_kernel_to_the_last_leaving_out_the_timers_own() {
        let records = [
            record("kbench_hold_stream", 100, 5_000),
            record("kbench_flush_l2", 5_000, 5_900),
            record("pass1", 6_000, 9_000),
            record("pass2", 9_500, 10_000),
            // An incomplete record (end before start) is not counted.
            record("pass3", 20_000, 0),
        ];
        let timer = ["kbench_hold_stream", "kbench_flush_l2"];
        let span = kernel_span_s(&records, &timer).unwrap();
        assert!((span - 4e-6).abs() < 1e-15, "{span}");
        assert_eq!(kernel_span_s(&records[..2], &timer), None);
    }
}
