//! kbench's safe device layer over cudarc (which loads libcuda and libnvrtc at run time): opening
//! a GPU and fingerprinting it, compiling each algorithm's kernel file once, device buffers that
//! know their dtype, kernels launched with plain arguments, CUDA graphs, and the primitives the
//! timer queues around a sample (the stream hold, the L2 flush, events).
//!
//! Algorithms see `Gpu`, `Kernel`, `DeviceBuf`, `DeviceIo` and `Graph`; `cudarc::driver::sys` and
//! raw pointers stay in this module. Without a driver nothing here is called: `Device::open`
//! checks for the libraries first, because cudarc panics (rather than erring) when they are
//! missing.

pub mod blas;
pub mod cupti;
pub mod cupti_profiler;
pub mod guard;
pub mod headers;
pub mod libs;
pub mod nvml;
pub mod nvrtc;
pub mod peaks;
pub mod ptx;
pub mod sparse;
pub mod timer;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUevent_flags};
use cudarc::driver::{
    result as driver_result, CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaModule,
    CudaSlice, CudaStream, DevicePtr, DriverError,
};
use cudarc::nvrtc::Ptx;

pub use nvrtc::{KernelFile, KernelSource};
pub use timer::Launcher;

use crate::record::DeviceFingerprint;
use crate::stage_clock::{self, Stage};
use crate::vocab::{DType, HostData};

/// Whether the driver library can be loaded; `Err` holds the reason to show for skipped cases.
pub fn driver_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver on this machine)".into())
    }
}

/// CUDA's device order: kbench sets PCI_BUS_ID, for itself (`main`, before `count`) and the
/// workers it starts, unless the user set one, so CUDA's ordinals are `nvidia-smi`'s.
pub const DEVICE_ORDER_ENV: &str = "CUDA_DEVICE_ORDER";

/// How many GPUs CUDA sees (those CUDA_VISIBLE_DEVICES names, where it is set), or why none
/// can be counted. Loads the driver in this process but opens no context on any GPU.
pub fn count() -> Result<u32, String> {
    driver_present()?;
    cudarc::driver::result::init()
        .and_then(|()| cudarc::driver::result::device::get_count())
        .map(|n| n.max(0) as u32)
        .map_err(|e| {
            format!(
                "the CUDA driver cannot count its devices: {:#}",
                driver_error(e)
            )
        })
}

/// Refuses, with the numbers, a case whose data (with the scratch a case may need on top, a
/// quarter more) would not fit in `free` bytes of device `name`.
pub fn fits_memory(data_bytes: u64, free: u64, name: &str) -> Result<(), String> {
    let needed = data_bytes.saturating_add(data_bytes / 4);
    if needed > free {
        return Err(format!(
            "too big for the device: needs about {:.2} GiB, {:.2} GiB of {name} is free",
            needed as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64,
        ));
    }
    Ok(())
}

/// Keeps `value` as JSON at `path` for a run's other workers (a compile, a GPU's peaks): written
/// aside and renamed, so that no process reads half a file; a failure to keep it costs only the
/// work again elsewhere.
fn keep_for_other_workers(path: &std::path::Path, value: &impl serde::Serialize) {
    let aside = path.with_extension(format!("{}.part", std::process::id()));
    let written = serde_json::to_vec(value)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&aside, bytes))
        .and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
}

/// Driver errors as text with the CUDA error name (`CUDA_ERROR_OUT_OF_MEMORY: out of memory`).
pub fn driver_error(e: DriverError) -> anyhow::Error {
    let name = e
        .error_name()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    anyhow!("{name}: {text}")
}

/// An open GPU: context, the one stream all work goes to, compiled modules, and what the timer
/// needs (the L2 flush buffer, the stream hold, two events).
pub struct Device {
    /// The third timer, when CUPTI's range profiler can be used. Declared first so that it is
    /// dropped first, while the context it is enabled on still lives.
    profiler: Option<cupti_profiler::KernelProfiler>,
    /// Set once a profiled run saw no kernel, or a CUDA graph was captured: CUPTI 13.0's range
    /// profiler sees none in a graph launch, and none at all in the process after one (seen on
    /// an H100), so no later case of this worker is profiled.
    profiler_blind: std::cell::Cell<bool>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pub fingerprint: DeviceFingerprint,
    arch: String,
    kernels: KernelSource,
    /// Compiled modules by kernel file; a failed compile is kept so every case using it fails fast.
    modules: HashMap<&'static str, Result<Module, String>>,
    /// Read before each cold sample: twice the L2 size (L2 / 2 four-byte words), so nothing a
    /// case left there survives (L2 replacement is not strictly least-recently-used).
    l2_flush: DeviceBuf,
    flush_kernel: Kernel,
    hold: StreamHold,
    start: CudaEvent,
    stop: CudaEvent,
    shared_optin_bytes: u32,
    /// Why the stream cannot be held here, if it cannot (see `probe_hold`).
    hold_refused: Option<String>,
    /// The second timer, when CUPTI is there.
    tracer: Option<cupti::KernelTracer>,
    /// Clocks and throttling, when NVML is there.
    clocks: Option<nvml::Clocks>,
    /// cuBLAS on `stream`, made on first use (`Gpu::blas`), or why it cannot be.
    blas: std::cell::OnceCell<Result<blas::Blas, String>>,
    /// cuSPARSE on `stream`, made on first use (`Gpu::sparse`), or why it cannot be.
    sparse: std::cell::OnceCell<Result<sparse::Sparse, String>>,
}

impl Device {
    /// Opens device 0, or says why not.
    pub fn open(kernels: KernelSource) -> Result<Device, String> {
        driver_present()?;
        nvrtc::nvrtc_present()?;
        Device::open_checked(kernels).map_err(|e| format!("CUDA device unusable: {e:#}"))
    }

    fn open_checked(kernels: KernelSource) -> Result<Device> {
        // CUPTI records kernels launched after it starts; starting it first costs nothing.
        let tracer = cupti::KernelTracer::start();
        let ctx = CudaContext::new(0).map_err(driver_error)?;
        // Everything runs in order on one explicit stream, so cudarc's per-buffer event tracking
        // (an event record and wait around every use of a buffer) is pure overhead; and unlike the
        // legacy default stream, an explicit one can be captured into a CUDA graph.
        // SAFETY: called before any buffer exists; all work goes to the one stream below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_error)?;
        let attr = |a: Attr| ctx.attribute(a).map_err(driver_error);
        let (major, minor) = ctx.compute_capability().map_err(driver_error)?;
        let mut driver = 0i32;
        // SAFETY: writes one int; the driver was loaded by CudaContext::new.
        unsafe { sys::cuDriverGetVersion(&mut driver) }
            .result()
            .map_err(driver_error)?;
        let (nvrtc_major, nvrtc_minor) = nvrtc::nvrtc_version()?;
        let memory_clock_mhz = attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64 / 1e3;
        let memory_bus_width_bits = attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as u32;
        let l2_cache_bytes = attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64;
        let l2_flush = DeviceBuf::zeroed(
            &stream,
            DType::I32,
            (l2_cache_bytes / 2).max(1 << 18) as usize,
        )?;
        let arch = format!("sm_{major}{minor}");
        // The timer's own kernels always come from the copy built into kbench, whatever
        // `--kernels-dir` says: they are part of the instrument, not of a study.
        let timer_module = {
            let file = timer::HOLD_KERNEL_FILE;
            let embedded = KernelSource::default();
            let ptx = nvrtc::compile(&embedded.describe(&file), &embedded.read(&file)?, &arch)?;
            Module::new(ctx.load_module(ptx).map_err(driver_error)?, Vec::new())
        };
        let hold = StreamHold::new(&stream, &timer_module)?;
        let flush_kernel = Kernel {
            function: timer_module
                .function(timer::FLUSH_KERNEL)
                .map_err(driver_error)?,
            stream: stream.clone(),
            name: timer::FLUSH_KERNEL.to_string(),
        };
        let event = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_error)
        };
        let pci_bus_id = pci_bus_id(&ctx)?;
        let clocks = nvml::Clocks::open(&pci_bus_id);
        let skip_peaks = skip_peaks_reason(|name| std::env::var_os(name));
        let datasheet = peaks::datasheet_gbytes_per_s(&pci_bus_id).ok();
        let profiler = match std::env::var("KBENCH_CUPTI_PROFILER").as_deref() {
            Ok("off") => Err("turned off by KBENCH_CUPTI_PROFILER=off".to_string()),
            _ => cupti::load_library()
                .and_then(|()| cupti_profiler::KernelProfiler::start(ctx.cu_ctx(), ctx.ordinal())),
        };
        let mut device = Device {
            fingerprint: DeviceFingerprint {
                name: ctx.name().map_err(driver_error)?,
                host: crate::env::hostname(),
                pci_bus_id,
                compute_capability: format!("{major}.{minor}"),
                sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
                total_memory_bytes: ctx.total_mem().map_err(driver_error)? as u64,
                l2_cache_bytes,
                sm_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64 / 1e3,
                memory_clock_mhz,
                memory_bus_width_bits,
                theoretical_memory_gbytes_per_s: 2.0
                    * memory_clock_mhz
                    * 1e6
                    * memory_bus_width_bits as f64
                    / 8.0
                    / 1e9,
                driver_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
                nvrtc_version: format!("{nvrtc_major}.{nvrtc_minor}"),
                measured_copy_gbytes_per_s: 0.0,
                measured_read_gbytes_per_s: 0.0,
                measured_write_gbytes_per_s: 0.0,
                measured_triad_gbytes_per_s: 0.0,
                datasheet_memory_gbytes_per_s: datasheet,
                host_to_device_gbytes_per_s: 0.0,
                device_to_host_gbytes_per_s: 0.0,
                event_overhead_s: 0.0,
                cupti_unavailable: tracer.as_ref().err().cloned(),
                cupti_profiler_unavailable: profiler.as_ref().err().cloned(),
                nvml_unavailable: clocks.as_ref().err().cloned(),
                // Under a profiler the energy window's hundreds of runs would each be profiled.
                energy_unavailable: match &skip_peaks {
                    Some(why) => clocks.is_ok().then(|| why.clone()),
                    None => clocks.as_ref().ok().and_then(|c| c.energy_mj().err()),
                },
                peaks_unmeasured: skip_peaks,
                mock: None,
            },
            shared_optin_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as u32,
            arch,
            kernels,
            modules: HashMap::new(),
            l2_flush,
            flush_kernel,
            hold,
            start: event()?,
            stop: event()?,
            hold_refused: None,
            tracer: tracer.ok(),
            profiler: profiler.ok(),
            profiler_blind: std::cell::Cell::new(false),
            clocks: clocks.ok(),
            blas: std::cell::OnceCell::new(),
            sparse: std::cell::OnceCell::new(),
            ctx,
            stream,
        };
        // The hold and the events' own cost first: the peaks are timed as cases are, behind a
        // held stream and less the events' cost (`time_held_s`).
        device.hold_refused = device.probe_hold()?;
        device.fingerprint.event_overhead_s = device.measure_event_overhead()?;
        if device.fingerprint.peaks_unmeasured.is_some() {
            return Ok(device);
        }
        let measured = match peaks::kept(&device.fingerprint.pci_bus_id) {
            Some(kept) => kept,
            None => {
                let measured = device.measure_peaks(&timer_module)?;
                peaks::keep(&device.fingerprint.pci_bus_id, &measured);
                measured
            }
        };
        let f = &mut device.fingerprint;
        f.measured_copy_gbytes_per_s = measured.copy;
        f.measured_read_gbytes_per_s = measured.read;
        f.measured_write_gbytes_per_s = measured.write;
        f.measured_triad_gbytes_per_s = measured.triad;
        f.host_to_device_gbytes_per_s = measured.to_device;
        f.device_to_host_gbytes_per_s = measured.to_host;
        Ok(device)
    }

    /// The memory's peaks and the host link, measured now.
    fn measure_peaks(&self, timer_module: &Module) -> Result<peaks::MeasuredPeaks> {
        let copy = self.measure_copy_bandwidth()?;
        // After the copy's warm-up, so the clocks have settled.
        let peak_kernels = peaks::PeakKernels::load(timer_module, self)?;
        let kernel_peaks = self.measure_kernel_peaks(&peak_kernels)?;
        let (to_device, to_host) = self.measure_host_link()?;
        Ok(peaks::MeasuredPeaks {
            copy,
            read: kernel_peaks.read_gbytes_per_s,
            write: kernel_peaks.write_gbytes_per_s,
            triad: kernel_peaks.triad_gbytes_per_s,
            to_device,
            to_host,
        })
    }

    /// The host link's speed each way: the median of 7 copies of 256 MiB between page-locked
    /// host memory and the device, after one of each to warm up.
    fn measure_host_link(&self) -> Result<(f64, f64)> {
        let host = HostData::I32(vec![0; 1 << 26]);
        let pinned = PinnedBuf::copy_of(self, &host)?;
        let device = self.alloc(DType::I32, host.len())?;
        let mut to_device = Vec::new();
        let mut to_host = Vec::new();
        for i in 0..8 {
            self.record_start()?;
            device.copy_from_pinned(&pinned)?;
            self.record_stop()?;
            let up = self.elapsed_raw_s()?;
            self.record_start()?;
            device.copy_to_pinned(&pinned)?;
            self.record_stop()?;
            let down = self.elapsed_raw_s()?;
            if i > 0 {
                to_device.push(up);
                to_host.push(down);
            }
        }
        let rate = |mut times: Vec<f64>| {
            times.sort_by(f64::total_cmp);
            pinned.bytes as f64 / times[times.len() / 2] / 1e9
        };
        Ok((rate(to_device), rate(to_host)))
    }

    /// Holds the stream once, briefly, and checks the host could queue behind it. Under a tool
    /// that runs each launch to completion before the call returns (Nsight Compute,
    /// compute-sanitizer), queueing the hold itself blocks until the hold gives up: then the
    /// device never holds, and says why.
    fn probe_hold(&self) -> Result<Option<String>> {
        self.hold.hold(timer::HOLD_PROBE_LIMIT_NS)?;
        self.record_start()?;
        self.record_stop()?;
        Ok((!self.release_stream()?).then(|| {
            "queueing behind a held stream blocks here (a profiler or sanitizer runs each launch to completion): samples are timed unheld".to_string()
        }))
    }

    /// Why this device cannot hold its stream, if it cannot.
    pub fn hold_refused(&self) -> Option<&str> {
        self.hold_refused.as_deref()
    }

    /// The median GPU time between a start and a stop event queued back to back behind a held
    /// stream (about 1.2 µs on an H100): what a pair of events costs by itself.
    fn measure_event_overhead(&self) -> Result<f64> {
        let mut times_s = Vec::new();
        for _ in 0..55 {
            times_s.push(self.time_held_raw_s(&mut || Ok(()))?);
        }
        times_s.drain(..5);
        times_s.sort_by(f64::total_cmp);
        Ok(times_s[times_s.len() / 2])
    }

    /// Median of 20 device-to-device copies of 1 GiB (or an eighth of the memory, if smaller),
    /// counting bytes read plus bytes written, as peers.py counts its copy, after at least
    /// COPY_WARMUP_S of copies. The warm-up does not settle it: on a freshly started H100 the
    /// first study of a command measured 2811 GB/s without it and 2795 with it, against 2947 and
    /// 2951 in the next study, so a share of the peak from a machine's first study can read 5%
    /// high (see the issue notes).
    fn measure_copy_bandwidth(&self) -> Result<f64> {
        const COPY_WARMUP_S: f64 = 0.25;
        let bytes = (1usize << 30).min(self.fingerprint.total_memory_bytes as usize / 8);
        let src = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_error)?;
        let mut dst = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_error)?;
        let mut copy = || -> Result<f64> {
            self.time_held_s(&mut || {
                self.stream
                    .memcpy_dtod(&src, &mut dst)
                    .map_err(driver_error)
            })
        };
        let mut warmup_s = 0.0;
        for _ in 0..1000 {
            warmup_s += copy()?;
            if warmup_s >= COPY_WARMUP_S {
                break;
            }
        }
        let mut times_s = (0..20).map(|_| copy()).collect::<Result<Vec<f64>>>()?;
        times_s.sort_by(f64::total_cmp);
        Ok(2.0 * bytes as f64 / times_s[times_s.len() / 2] / 1e9)
    }

    /// After a kernel fault (illegal address, trap, launch failure) the context is unusable for
    /// good: every later call returns the same error. True when that has happened.
    pub fn is_broken(&self) -> bool {
        self.stream.synchronize().is_err() || self.ctx.check_err().is_err()
    }

    /// Refuses, with the numbers, a case whose data would not fit in the device's free memory
    /// (with the scratch a case may need on top, a quarter more).
    pub fn check_memory(&self, data_bytes: u64) -> Result<(), String> {
        let (free, _total) = self
            .ctx
            .mem_get_info()
            .map_err(|e| format!("{:#}", driver_error(e)))?;
        fits_memory(data_bytes, free as u64, &self.fingerprint.name)
    }

    /// The module compiled from `file` (with its options and name expressions), compiling it on
    /// first use. Modules are cached by the file's name, which for a custom study's sources
    /// includes the case's defines and options.
    pub fn module(&mut self, file: &KernelFile) -> Result<Module> {
        if !self.modules.contains_key(file.name) {
            let built = stage_clock::time(Stage::Compile, || {
                self.kernels
                    .read(file)
                    .and_then(|src| {
                        let label = self.kernels.describe(file);
                        nvrtc::compile_file(&label, &src, &self.arch, file.options, file.names)
                    })
                    .and_then(|compiled| {
                        let cuda = (self.ctx.load_module(Ptx::from_src(compiled.ptx)))
                            .map_err(driver_error)?;
                        Ok(Module::new(cuda, compiled.lowered))
                    })
                    .map_err(|e| format!("{e:#}"))
            });
            self.modules.insert(file.name, built);
        }
        self.modules[file.name].clone().map_err(|e| anyhow!(e))
    }

    /// What an algorithm's launcher sees of the device, with its module.
    pub fn gpu<'a>(&'a self, module: &'a Module) -> Gpu<'a> {
        Gpu {
            device: self,
            module,
        }
    }

    /// A zeroed buffer of `len` elements (one, if `len` is 0: the driver refuses empty
    /// allocations, and kernels of empty cases still get a valid pointer).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuf> {
        DeviceBuf::zeroed(&self.stream, dtype, len)
    }

    /// A buffer holding a copy of `host`.
    pub fn upload(&self, host: &HostData) -> Result<DeviceBuf> {
        let buf = self.alloc(host.dtype(), host.len())?;
        buf.copy_from_host(host)?;
        Ok(buf)
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(driver_error)
    }

    /// `count` new streams for work that overlaps copies and kernels.
    pub fn new_streams(&self, count: usize) -> Result<Vec<Stream>> {
        (0..count)
            .map(|_| Ok(Stream(self.ctx.new_stream().map_err(driver_error)?)))
            .collect()
    }

    /// Makes the device's stream wait for everything queued on `stream` so far.
    pub fn join(&self, stream: &Stream) -> Result<()> {
        self.stream.join(&stream.0).map_err(driver_error)
    }

    // ---- What the timer queues around a sample (see `timer`). ----

    /// Reads the L2 flush buffer through L2, evicting whatever the last sample left there and
    /// leaving only clean lines (see `kbench_flush_l2` in kernels/timer.cu).
    pub(crate) fn flush_l2(&self) -> Result<()> {
        let vectors = self.l2_flush.bytes.len() as u64 / 16;
        let grid = self.fingerprint.sm_count * 8;
        // SAFETY: signature (const int4* buffer, unsigned long long n16, int* sink); the buffer
        // holds `vectors` 16-byte vectors (cudaMalloc aligns to 256) and is zeroed, so `sink`
        // (its own first word) is never written.
        unsafe {
            self.flush_kernel.launch(
                Dims::linear(grid, 256, 0),
                &[self.l2_flush.arg(), Arg::U64(vectors), self.l2_flush.arg()],
            )
        }
    }

    /// Sets the context's persisting-L2 carve-out to 0 and turns every persisting line back to
    /// normal, before a case: a kernel (a custom one especially) may set an access-policy window
    /// that keeps its data in L2 across the cold flush, which reads through L2 but cannot evict
    /// lines set aside for persisting accesses. Waits for the stream first, as the limit may
    /// only change between kernels.
    pub fn reset_persisting_l2(&self) -> Result<()> {
        self.synchronize()?;
        self.ctx.bind_to_thread().map_err(driver_error)?;
        // SAFETY: plain driver calls on the current context, with no kernel in flight.
        unsafe {
            sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0)
                .result()
                .map_err(driver_error)
                .context("setting the persisting-L2 limit to 0")?;
            sys::cuCtxResetPersistingL2Cache()
                .result()
                .map_err(driver_error)
                .context("resetting the persisting L2 lines")?;
        }
        Ok(())
    }

    pub(crate) fn record_start(&self) -> Result<()> {
        self.start.record(&self.stream).map_err(driver_error)
    }

    pub(crate) fn record_stop(&self) -> Result<()> {
        self.stop.record(&self.stream).map_err(driver_error)
    }

    /// Waits for the stop event and returns the time between the two events, less what the
    /// events cost by themselves (`event_overhead_s`).
    pub(crate) fn elapsed_s(&self) -> Result<f64> {
        Ok(self.less_event_overhead(self.elapsed_raw_s()?))
    }

    /// A time between two events less what the events cost by themselves.
    fn less_event_overhead(&self, raw_s: f64) -> f64 {
        (raw_s - self.fingerprint.event_overhead_s).max(0.0)
    }

    /// The GPU time of what `enqueue` queues, timed as a kernel-scope sample is: queued behind
    /// the held stream (where the device can hold it), so the start event does not count the
    /// host's launch latency (it did: the read peak came out 2-3% under what Nsight Compute
    /// gives its kernel, below reduce_fast's own rate), less what the events cost by themselves.
    pub(crate) fn time_held_s(&self, enqueue: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        Ok(self.less_event_overhead(self.time_held_raw_s(enqueue)?))
    }

    /// `time_held_s` with the events' own cost left in (what `measure_event_overhead` measures).
    fn time_held_raw_s(&self, enqueue: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        let held = self.hold_refused.is_none();
        if held {
            self.hold_stream()?;
        }
        let queued = (|| {
            self.record_start()?;
            enqueue()?;
            self.record_stop()
        })();
        // Whatever happened while queueing, the stream must be let go.
        if held {
            self.release_stream()?;
        }
        queued?;
        self.elapsed_raw_s()
    }

    /// Waits for the stop event and returns the time between the two events.
    fn elapsed_raw_s(&self) -> Result<f64> {
        self.stop.synchronize().map_err(driver_error)?;
        let ms = self.start.elapsed_ms(&self.stop).map_err(driver_error)?;
        Ok(ms as f64 / 1e3)
    }

    /// Queues the spin kernel that holds the stream until `release_stream`.
    pub(crate) fn hold_stream(&self) -> Result<()> {
        self.hold.hold(timer::HOLD_LIMIT_NS)
    }

    /// Lets the held stream go. Returns false if the hold had already given up waiting (its
    /// time limit passed while the host was still queueing: the sample is not valid).
    pub(crate) fn release_stream(&self) -> Result<bool> {
        self.hold.release();
        self.stop.synchronize().map_err(driver_error)?;
        Ok(!self.hold.timed_out())
    }
}

/// A compiled kernel file, and the lowered (mangled) name of each C++ kernel its launches name
/// as written (`softmax<BLOCK, T>`), from NVRTC.
#[derive(Clone)]
pub struct Module {
    cuda: Arc<CudaModule>,
    lowered: Arc<[(String, String)]>,
}

impl Module {
    fn new(cuda: Arc<CudaModule>, lowered: Vec<(String, String)>) -> Module {
        Module {
            cuda,
            lowered: lowered.into(),
        }
    }

    /// The module's function a launch names: by its lowered name where the name is a C++ name
    /// expression, else by the name itself.
    fn function(&self, name: &str) -> Result<CudaFunction, DriverError> {
        let symbol = (self.lowered.iter())
            .find(|(written, _)| written == name)
            .map_or(name, |(_, lowered)| lowered.as_str());
        self.cuda.load_function(symbol)
    }
}

/// The PCI bus id the driver gives the context's device, as NVML and nvidia-smi print it.
fn pci_bus_id(ctx: &CudaContext) -> Result<String> {
    let mut text = [0 as std::ffi::c_char; 32];
    // SAFETY: writes a NUL-terminated string of at most 32 bytes into `text`.
    unsafe { sys::cuDeviceGetPCIBusId(text.as_mut_ptr(), text.len() as i32, ctx.cu_device()) }
        .result()
        .map_err(driver_error)?;
    // SAFETY: the driver wrote a NUL-terminated string within the buffer.
    let id = unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) };
    Ok(id.to_string_lossy().into_owned())
}

/// A one-thread kernel that spins on a flag in host-mapped memory, so that the work queued behind
/// it (flush, events, the case's kernels) starts only when the host says, back to back, however
/// long the host took to queue it (NVBench's blocking kernel). It gives up after a time limit,
/// so a host that blocks while queueing (a full launch queue) cannot deadlock: the sample is then
/// refused.
struct StreamHold {
    /// Two words of host-mapped memory: [0] the release flag, [1] set by the kernel if it gave up.
    host: *mut u32,
    device_ptr: u64,
    kernel: Kernel,
}

impl StreamHold {
    fn new(stream: &Arc<CudaStream>, module: &Module) -> Result<Self> {
        // SAFETY: allocates 8 bytes of pinned, device-mapped host memory, freed in Drop.
        let host = unsafe { driver_result::malloc_host(8, sys::CU_MEMHOSTALLOC_DEVICEMAP) }
            .map_err(driver_error)? as *mut u32;
        let mut device_ptr: sys::CUdeviceptr = 0;
        // SAFETY: `host` is a live device-mapped allocation; the call writes one device pointer.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, host as *mut c_void, 0) }
            .result()
            .map_err(driver_error)?;
        let function = module.function(timer::HOLD_KERNEL).map_err(driver_error)?;
        Ok(StreamHold {
            host,
            device_ptr,
            kernel: Kernel {
                function,
                stream: stream.clone(),
                name: timer::HOLD_KERNEL.to_string(),
            },
        })
    }

    fn hold(&self, timeout_ns: u64) -> Result<()> {
        // SAFETY: `host` points to two live u32 words; the previous hold kernel has finished
        // (each sample waits for its stop event), so nothing reads them concurrently.
        unsafe {
            std::ptr::write_volatile(self.host, 0);
            std::ptr::write_volatile(self.host.add(1), 0);
        }
        // SAFETY: the hold kernel's signature is (volatile unsigned int* flag, unsigned long long
        // timeout_ns); `flag` is the device address of the two mapped words; one thread.
        unsafe {
            self.kernel.launch(
                Dims::linear(1, 1, 0),
                &[Arg::Ptr(self.device_ptr), Arg::U64(timeout_ns)],
            )
        }
    }

    fn release(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `host` points to a live mapped word the kernel only reads.
        unsafe { std::ptr::write_volatile(self.host, 1) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    fn timed_out(&self) -> bool {
        // SAFETY: `host` points to two live words; the kernel has finished (stop event waited).
        unsafe { std::ptr::read_volatile(self.host.add(1)) != 0 }
    }
}

impl Drop for StreamHold {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_host in `new`; no kernel uses it once the device is dropped
        // (its stream is synchronized by cudarc before the context goes).
        unsafe {
            let _ = self.kernel.stream.synchronize();
            let _ = driver_result::free_host(self.host as *mut c_void);
        }
    }
}

/// What an algorithm's launcher sees of the device: its module's kernels, allocation, a few
/// properties, and graph capture.
#[derive(Clone, Copy)]
pub struct Gpu<'a> {
    device: &'a Device,
    module: &'a Module,
}

impl<'a> Gpu<'a> {
    /// The kernel `name` of the algorithm's module.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let function = self.module.function(name).map_err(|e| {
            anyhow!(
                "kernel `{name}` not found in the module: {}",
                driver_error(e)
            )
        })?;
        Ok(Kernel {
            function,
            stream: self.device.stream.clone(),
            name: name.to_string(),
        })
    }

    /// A zeroed buffer (see `Device::alloc`).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuf> {
        self.device.alloc(dtype, len)
    }

    /// Copies `from` into the module's `__constant__` variable `symbol` (queued on the stream,
    /// before the runs that read it). A buffer larger than the variable is refused.
    pub fn fill_constant(&self, symbol: &str, from: &DeviceBuf) -> Result<()> {
        let variable = (self.module.cuda)
            .get_global(symbol, &self.device.stream)
            .map_err(|e| {
                anyhow!(
                    "the sources have no __constant__ variable `{symbol}`: {}",
                    driver_error(e)
                )
            })?;
        let (address, size_bytes) = (variable.device_ptr(&self.device.stream).0, variable.len());
        let bytes = from.len() * from.dtype().size_bytes() as usize;
        if bytes > size_bytes {
            bail!("`{symbol}` holds {size_bytes} bytes, and its buffer has {bytes}");
        }
        // SAFETY: both addresses are live device allocations of at least `bytes` bytes (the
        // buffer's region, guard zones excluded, and the variable, checked above).
        unsafe {
            driver_result::memcpy_dtod_async(
                address,
                from.ptr,
                bytes,
                self.device.stream.cu_stream(),
            )
        }
        .map_err(driver_error)
    }

    pub fn sm_count(&self) -> u32 {
        self.device.fingerprint.sm_count
    }

    /// The most shared memory one block may use, once its kernel allows it.
    pub fn shared_optin_bytes(&self) -> u32 {
        self.device.shared_optin_bytes
    }

    /// Waits until everything queued on the device's stream has run (for a launcher's untimed
    /// warm-up when it is made, such as cuBLAS's first call, which loads its kernels).
    pub fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    /// cuBLAS bound to the device's stream: made once per device, on first use (libcublas is
    /// loaded then), or an error saying why it cannot be (no libcublas on this machine).
    pub fn blas(&self) -> Result<&'a blas::Blas> {
        let device: &'a Device = self.device;
        device
            .blas
            .get_or_init(|| blas::Blas::new(&device.stream))
            .as_ref()
            .map_err(|e| anyhow!("{e}"))
    }

    /// cuSPARSE bound to the device's stream: made once per device, on first use (libcusparse is
    /// loaded then), or an error saying why it cannot be (no libcusparse on this machine).
    pub fn sparse(&self) -> Result<&'a sparse::Sparse> {
        let device: &'a Device = self.device;
        device
            .sparse
            .get_or_init(|| sparse::Sparse::new(&device.stream))
            .as_ref()
            .map_err(|e| anyhow!("{e}"))
    }

    /// Captures what `enqueue` launches into a CUDA graph, to be replayed with `Graph::launch`.
    pub fn capture(&self, enqueue: impl FnOnce() -> Result<()>) -> Result<Graph> {
        let stream = &self.device.stream;
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(driver_error)?;
        let captured = enqueue();
        // End the capture whatever happened, or the stream stays in capture mode.
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        captured.context("capturing launches into a CUDA graph")?;
        let graph = ended
            .map_err(driver_error)?
            .ok_or_else(|| anyhow!("the CUDA graph capture recorded nothing"))?;
        // The graph is captured to be launched, and after a graph launch CUPTI's range profiler
        // sees no kernel in this process: later cases are not profiled, and say why.
        self.device.profiler_blind.set(true);
        Ok(Graph(graph))
    }

    /// `launcher`'s run captured once into a CUDA graph, as a launcher that replays it (a run of
    /// no launches is not captured: its replay does nothing); Err: the launcher back, with why
    /// the capture failed.
    pub fn replay<'l>(
        &self,
        mut launcher: Box<dyn Launcher + 'l>,
    ) -> Result<Box<dyn Launcher + 'l>, CaptureFailed<'l>> {
        let graph = if launcher.launches_per_run() == 0 {
            None
        } else {
            match self.capture(|| launcher.launch()) {
                Ok(graph) => Some(graph),
                Err(e) => return Err((launcher, e)),
            }
        };
        Ok(Box::new(Replay {
            graph,
            captured: launcher,
        }))
    }
}

/// A launcher whose run could not be captured into a graph, given back with the error.
pub type CaptureFailed<'l, S = Stream> = (Box<dyn Launcher<S> + 'l>, anyhow::Error);

/// A launcher's run replayed from the CUDA graph it was captured into (`Gpu::replay`); the
/// captured launcher keeps the buffers its launches use alive and answers for its guards and
/// facts.
struct Replay<'l> {
    graph: Option<Graph>,
    captured: Box<dyn Launcher + 'l>,
}

impl Launcher for Replay<'_> {
    fn launch(&mut self) -> Result<()> {
        match &self.graph {
            Some(graph) => graph.launch(),
            None => Ok(()),
        }
    }
    /// One submission, but each of its kernels takes its own place in the launch queue behind a
    /// held stream, as launched one by one: the hold's limit counts them all.
    fn launches_per_run(&self) -> usize {
        self.captured.launches_per_run()
    }
    fn graph_refused(&self) -> Option<&'static str> {
        Some("its runs are replayed from a CUDA graph already")
    }
    fn check_guards(&self) -> Result<()> {
        self.captured.check_guards()
    }
    fn facts(&mut self) -> Result<Vec<(String, f64)>> {
        self.captured.facts()
    }
}

/// A captured sequence of launches.
pub struct Graph(CudaGraph);

impl Graph {
    /// Replays the graph on the stream it was captured from.
    pub fn launch(&self) -> Result<()> {
        self.0.launch().map_err(driver_error)
    }
}

/// Grid and block shape and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

impl Dims {
    pub fn linear(grid: u32, block: u32, shared_bytes: u32) -> Dims {
        Dims {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_bytes,
        }
    }
}

/// A kernel argument: a device address or a scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    Ptr(u64),
    /// A 1-byte scalar (`char`, `unsigned char`), as its bits.
    U8(u8),
    /// A 2-byte scalar (`short`, `__half`, `__nv_bfloat16`), as its bits.
    U16(u16),
    I32(i32),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
}

/// The most arguments a kernel takes here.
const MAX_ARGS: usize = 16;

/// Chunks of work split over streams start at multiples of this many elements, so that every
/// chunk of every array stays 16-byte aligned for vector loads (1 KiB of float32).
pub const CHUNK_ALIGN: usize = 256;

/// A stream beside the device's own, for work that overlaps copies and kernels. Its work
/// starts after what the device's stream has queued before `follow` and is waited for by
/// `Device::join`.
pub struct Stream(Arc<CudaStream>);

impl Stream {
    /// Makes this stream's later work wait for everything queued on the device's stream so far.
    pub fn follow(&self, device: &Device) -> Result<()> {
        self.0.join(&device.stream).map_err(driver_error)
    }
}

/// A kernel of a loaded module, bound to the device's stream.
pub struct Kernel {
    function: CudaFunction,
    stream: Arc<CudaStream>,
    name: String,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The most threads a block of this kernel can have: 1024, or fewer where its registers (or
    /// its `__launch_bounds__`) allow fewer.
    pub fn max_threads_per_block(&self) -> Result<u32> {
        Ok(self
            .function
            .max_threads_per_block()
            .map_err(driver_error)? as u32)
    }

    /// The registers each thread of the kernel uses.
    pub fn registers(&self) -> Result<u32> {
        Ok(self.function.num_regs().map_err(driver_error)? as u32)
    }

    /// The kernel's static shared memory.
    pub fn static_shared_bytes(&self) -> Result<u32> {
        Ok(self.function.shared_size_bytes().map_err(driver_error)? as u32)
    }

    /// How many blocks of `block` threads using `dynamic_shared_bytes` each fit one SM at once.
    pub fn max_active_blocks_per_sm(&self, block: u32, dynamic_shared_bytes: u32) -> Result<u32> {
        self.function
            .occupancy_max_active_blocks_per_multiprocessor(
                block,
                dynamic_shared_bytes as usize,
                None,
            )
            .map_err(driver_error)
    }

    /// Raises the kernel's dynamic shared memory limit to `bytes` (needed above 48 KiB).
    pub fn allow_dynamic_shared(&self, bytes: u32) -> Result<()> {
        self.function
            .set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(driver_error)
    }

    /// Queues one launch on the device's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and type (`Ptr` for any
    /// pointer, the scalar variants for scalars of that exact width), and every buffer the kernel
    /// touches for these `dims` must be large enough and live until the launch has run.
    pub unsafe fn launch(&self, dims: Dims, args: &[Arg]) -> Result<()> {
        // SAFETY: as this function's.
        unsafe { self.launch_on(&self.stream, dims, args) }
    }

    /// Queues one launch on `stream` (a chunk of work beside the device's stream).
    ///
    /// # Safety
    /// As `launch`.
    pub unsafe fn launch_on_stream(&self, stream: &Stream, dims: Dims, args: &[Arg]) -> Result<()> {
        // SAFETY: as this function's.
        unsafe { self.launch_on(&stream.0, dims, args) }
    }

    unsafe fn launch_on(&self, stream: &CudaStream, dims: Dims, args: &[Arg]) -> Result<()> {
        if args.len() > MAX_ARGS {
            bail!("kernel `{}`: more than {MAX_ARGS} arguments", self.name);
        }
        let mut params = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
        for (param, arg) in params.iter_mut().zip(args) {
            *param = match arg {
                Arg::Ptr(v) | Arg::U64(v) => v as *const u64 as *mut c_void,
                Arg::U8(v) => v as *const u8 as *mut c_void,
                Arg::U16(v) => v as *const u16 as *mut c_void,
                Arg::I32(v) => v as *const i32 as *mut c_void,
                Arg::U32(v) => v as *const u32 as *mut c_void,
                Arg::F32(v) => v as *const f32 as *mut c_void,
                Arg::F64(v) => v as *const f64 as *mut c_void,
            };
        }
        // SAFETY: the caller vouches for the arguments (see above); each pointer in `params`
        // points into `args`, which outlives the call (the driver copies the values at launch).
        unsafe {
            driver_result::launch_kernel(
                self.function.cu_function(),
                dims.grid,
                dims.block,
                dims.shared_bytes,
                stream.cu_stream(),
                &mut params[..args.len()],
            )
        }
        .map_err(driver_error)
        .with_context(|| format!("launching `{}`", self.name))
    }
}

/// A device buffer that knows its element type and length. Kernels take it as a pointer.
pub struct DeviceBuf {
    /// The whole allocation: the buffer, and its guard zones where it has them.
    bytes: CudaSlice<u8>,
    /// The buffer's first element (`guard_bytes` into `bytes`).
    ptr: u64,
    /// The guard zone before and after the buffer (see `guard`); 0 for a plain buffer.
    guard_bytes: usize,
    dtype: DType,
    len: usize,
    stream: Arc<CudaStream>,
}

impl DeviceBuf {
    /// A zeroed buffer of `len` elements (one, if `len` is 0: the driver refuses empty
    /// allocations, and kernels of empty cases still get a valid pointer).
    fn zeroed(stream: &Arc<CudaStream>, dtype: DType, len: usize) -> Result<DeviceBuf> {
        let bytes = len
            .max(1)
            .checked_mul(dtype.size_bytes() as usize)
            .ok_or_else(|| anyhow!("{len} elements of {dtype} overflow the address space"))?;
        let slice = stream.alloc_zeros::<u8>(bytes).map_err(driver_error)?;
        let ptr = slice.device_ptr(stream).0;
        Ok(DeviceBuf {
            ptr,
            bytes: slice,
            guard_bytes: 0,
            dtype,
            len,
            stream: stream.clone(),
        })
    }

    /// The buffer as a kernel argument.
    pub fn arg(&self) -> Arg {
        Arg::Ptr(self.ptr)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues a copy of `host` into the buffer's first elements. (Like a kernel, a copy writes
    /// device memory through the buffer's address: it needs no exclusive borrow.)
    pub fn copy_from_host(&self, host: &HostData) -> Result<()> {
        if host.dtype() != self.dtype || host.len() > self.len {
            bail!(
                "cannot copy {} {} elements into a device buffer of {} {}",
                host.len(),
                host.dtype(),
                self.len,
                self.dtype
            );
        }
        if host.is_empty() {
            return Ok(());
        }
        let src = host.as_bytes();
        // SAFETY: `src` is a live host slice of src.len() bytes and the buffer holds at least as
        // many (checked above). From pageable memory the driver stages the copy and returns only
        // once `src` may be reused.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                self.ptr,
                src.as_ptr() as *const c_void,
                src.len(),
                self.stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver_error)
    }

    /// Queues a copy of `src` (same dtype, no longer than this buffer) into this buffer.
    pub fn copy_from_device(&self, src: &DeviceBuf) -> Result<()> {
        if src.dtype != self.dtype || src.len > self.len {
            bail!(
                "cannot copy a device buffer of {} {} into one of {} {}",
                src.len,
                src.dtype,
                self.len,
                self.dtype
            );
        }
        let bytes = src.len * src.dtype.size_bytes() as usize;
        // SAFETY: both ranges lie within live allocations (checked above) and do not overlap
        // (distinct allocations).
        unsafe { sys::cuMemcpyDtoDAsync_v2(self.ptr, src.ptr, bytes, self.stream.cu_stream()) }
            .result()
            .map_err(driver_error)
    }

    /// The address of element `first`, as a kernel argument (a chunk of the buffer).
    pub fn arg_at(&self, first: usize) -> Result<Arg> {
        if first > self.len {
            bail!(
                "element {first} is past the end of a buffer of {}",
                self.len
            );
        }
        Ok(Arg::Ptr(
            self.ptr + (first * self.dtype.size_bytes() as usize) as u64,
        ))
    }

    /// Queues a copy of `src` (page-locked, so truly asynchronous) into this buffer.
    pub fn copy_from_pinned(&self, src: &PinnedBuf) -> Result<()> {
        self.copy_range_from_pinned(src, (0, src.len), &self.stream)
    }

    /// Queues a copy of this buffer's first `dst.len` elements into `dst` (page-locked).
    pub fn copy_to_pinned(&self, dst: &PinnedBuf) -> Result<()> {
        self.copy_range_to_pinned(dst, (0, dst.len), &self.stream)
    }

    /// Queues, on `stream`, a copy of elements `first .. first + count` of `src` (page-locked)
    /// into the same elements of this buffer.
    pub fn copy_chunk_from_pinned(
        &self,
        src: &PinnedBuf,
        chunk: (usize, usize),
        stream: &Stream,
    ) -> Result<()> {
        self.copy_range_from_pinned(src, chunk, &stream.0)
    }

    /// Queues, on `stream`, a copy of elements `first .. first + count` of this buffer into the
    /// same elements of `dst` (page-locked).
    pub fn copy_chunk_to_pinned(
        &self,
        dst: &PinnedBuf,
        chunk: (usize, usize),
        stream: &Stream,
    ) -> Result<()> {
        self.copy_range_to_pinned(dst, chunk, &stream.0)
    }

    fn copy_range_from_pinned(
        &self,
        src: &PinnedBuf,
        (first, count): (usize, usize),
        stream: &CudaStream,
    ) -> Result<()> {
        let (offset, bytes) = self.range_bytes(src, first, count)?;
        // SAFETY: the range lies within both buffers (checked by range_bytes); `src` is live
        // page-locked memory, which its owner keeps alive until the device's stream (which
        // joins any other stream the copy went on) is synchronized.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                self.ptr + offset as u64,
                src.ptr.add(offset) as *const c_void,
                bytes,
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver_error)
    }

    fn copy_range_to_pinned(
        &self,
        dst: &PinnedBuf,
        (first, count): (usize, usize),
        stream: &CudaStream,
    ) -> Result<()> {
        let (offset, bytes) = self.range_bytes(dst, first, count)?;
        // SAFETY: as in `copy_range_from_pinned`, the other way.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.ptr.add(offset) as *mut c_void,
                self.ptr + offset as u64,
                bytes,
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver_error)
    }

    /// The byte offset and length of elements `first .. first + count`, checked to lie within
    /// this buffer and `pinned` (same element type).
    fn range_bytes(
        &self,
        pinned: &PinnedBuf,
        first: usize,
        count: usize,
    ) -> Result<(usize, usize)> {
        self.check_same(pinned.dtype, pinned.len)?;
        match first.checked_add(count) {
            Some(end) if end <= pinned.len => {}
            _ => bail!(
                "elements {first} + {count} are past the end of {} elements",
                pinned.len
            ),
        }
        let size = self.dtype.size_bytes() as usize;
        Ok((first * size, count * size))
    }

    fn check_same(&self, dtype: DType, len: usize) -> Result<()> {
        if dtype != self.dtype || len > self.len {
            bail!(
                "a host buffer of {len} {dtype} does not fit a device buffer of {} {}",
                self.len,
                self.dtype
            );
        }
        Ok(())
    }

    /// Copies the buffer's first `host.len()` elements into `host` (waits for the copy).
    pub fn copy_to_host(&self, host: &mut HostData) -> Result<()> {
        if host.dtype() != self.dtype || host.len() > self.len {
            bail!(
                "cannot copy a device buffer of {} {} into {} {} elements",
                self.len,
                self.dtype,
                host.len(),
                host.dtype()
            );
        }
        if host.is_empty() {
            return Ok(());
        }
        let dst = host.as_bytes_mut();
        let src = self
            .bytes
            .slice(self.guard_bytes..self.guard_bytes + dst.len());
        self.stream.memcpy_dtoh(&src, dst).map_err(driver_error)?;
        self.stream.synchronize().map_err(driver_error)
    }

    /// The buffer's bytes on the device, guard zones excluded (at least one element's for a
    /// plain buffer, which is never empty).
    fn region_bytes(&self) -> usize {
        self.bytes.len() - 2 * self.guard_bytes
    }

    /// Sets every byte of the buffer to `byte`.
    fn fill_bytes(&self, byte: u8) -> Result<()> {
        // SAFETY: the address and size come from this live allocation.
        unsafe {
            driver_result::memset_d8_async(
                self.ptr,
                byte,
                self.region_bytes(),
                self.stream.cu_stream(),
            )
        }
        .map_err(driver_error)
    }

    /// Fills the buffer with NaN (floats) or an unlikely pattern (integers).
    pub fn poison(&self) -> Result<()> {
        match self.dtype {
            DType::F32 => {
                let stream = self.stream.cu_stream();
                // SAFETY: the address and size come from this live allocation.
                unsafe {
                    sys::cuMemsetD32Async(
                        self.ptr,
                        f32::NAN.to_bits(),
                        self.region_bytes() / 4,
                        stream,
                    )
                }
                .result()
                .map_err(driver_error)
            }
            // All-ones bytes are a NaN in float64, float16, bfloat16 and both 8-bit floats.
            DType::F64 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => {
                self.fill_bytes(0xFF)
            }
            // Every integer type: bytes of 0xA5 (`POISON_I32` in an int).
            _ => self.fill_bytes(crate::vocab::POISON_BYTE),
        }
    }
}

/// Page-locked host memory, which the GPU copies to and from asynchronously, at the link's full
/// speed.
pub struct PinnedBuf {
    ptr: *mut u8,
    bytes: usize,
    dtype: DType,
    len: usize,
    stream: Arc<CudaStream>,
}

impl PinnedBuf {
    /// Page-locked memory holding a copy of `host`.
    pub fn copy_of(device: &Device, host: &HostData) -> Result<PinnedBuf> {
        let bytes = host.as_bytes().len();
        // SAFETY: allocates max(bytes, 1) bytes of page-locked memory, freed in Drop.
        let ptr = unsafe { driver_result::malloc_host(bytes.max(1), 0) }.map_err(driver_error)?
            as *mut u8;
        // SAFETY: `ptr` holds at least `bytes` bytes and does not overlap `host`.
        unsafe { std::ptr::copy_nonoverlapping(host.as_bytes().as_ptr(), ptr, bytes) };
        Ok(PinnedBuf {
            ptr,
            bytes,
            dtype: host.dtype(),
            len: host.len(),
            stream: device.stream.clone(),
        })
    }

    /// Copies the buffer into `host` (same dtype and length), after waiting for the stream.
    pub fn copy_to(&self, host: &mut HostData) -> Result<()> {
        if host.dtype() != self.dtype || host.len() != self.len {
            bail!(
                "cannot copy {} {} into {} {}",
                self.len,
                self.dtype,
                host.len(),
                host.dtype()
            );
        }
        self.stream.synchronize().map_err(driver_error)?;
        // SAFETY: `ptr` holds `bytes` bytes, as many as `host` (same dtype and length).
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr, host.as_bytes_mut().as_mut_ptr(), self.bytes)
        };
        Ok(())
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_host; no copy uses it once the stream has drained.
        unsafe {
            let _ = self.stream.synchronize();
            let _ = driver_result::free_host(self.ptr as *mut c_void);
        }
    }
}

/// A case's named inputs and outputs on the device. `B` is the buffer: a `DeviceBuf` for every
/// algorithm; the mock device's host-memory buffers, so that the scope logic is written once.
pub struct DeviceIo<B = DeviceBuf> {
    pub inputs: Vec<(&'static str, B)>,
    pub outputs: Vec<(&'static str, B)>,
    /// (output, input): outputs computed in place over a copy of an input.
    pub in_place: Vec<(&'static str, &'static str)>,
    /// `[measure] fresh_inputs`: a pristine copy of each input, copied over it before every
    /// run (`refresh_inputs`), so no run sees what an earlier one left; empty otherwise.
    pub pristine: Vec<(&'static str, B)>,
    /// How many times the inputs were copied over from `pristine`.
    pub refreshes: std::cell::Cell<u64>,
}

impl<B> DeviceIo<B> {
    pub fn input(&self, name: &str) -> Result<&B> {
        find(&self.inputs, name).ok_or_else(|| anyhow!("the case has no input `{name}`"))
    }

    pub fn output(&self, name: &str) -> Result<&B> {
        find(&self.outputs, name).ok_or_else(|| anyhow!("the case has no output `{name}`"))
    }

    /// The input an output computed in place starts from, if it is one.
    pub fn in_place_input(&self, output: &str) -> Option<&'static str> {
        (self.in_place.iter())
            .find(|(o, _)| *o == output)
            .map(|&(_, input)| input)
    }
}

impl DeviceIo {
    /// Copies every input over from its pristine copy (queued, device to device), where the
    /// case has them (`fresh_inputs`); nothing otherwise.
    pub fn refresh_inputs(&self) -> Result<()> {
        for (name, pristine) in &self.pristine {
            self.input(name)?.copy_from_device(pristine)?;
        }
        if !self.pristine.is_empty() {
            self.refreshes.set(self.refreshes.get() + 1);
        }
        Ok(())
    }

    /// Readies the outputs for a run: poisoned, or copied from their input when computed in
    /// place.
    pub fn reset_outputs(&self) -> Result<()> {
        for (name, buf) in &self.outputs {
            match self.in_place_input(name) {
                Some(input) => buf.copy_from_device(self.input(input)?)?,
                None => buf.poison()?,
            }
        }
        Ok(())
    }
}

fn find<'a, B>(buffers: &'a [(&'static str, B)], name: &str) -> Option<&'a B> {
    buffers.iter().find(|(n, _)| *n == name).map(|(_, b)| b)
}

/// The variable that turns the peaks and the energy windows off (see `skip_peaks_reason`).
const SKIP_PEAKS_ENV: &str = "KBENCH_SKIP_PEAKS";

/// Set by Nsight Compute (2025.3) in every process it launches and profiles.
const NSIGHT_COMPUTE_ENV: &str = "NV_COMPUTE_PROFILER_PERFWORKS_DIR";

/// Why the peaks and energy windows are skipped, given the environment (`var`): where
/// `KBENCH_SKIP_PEAKS` is set and not 0 (the timer sweep sets it), or where Nsight Compute runs the
/// process. Nsight Compute serializes and replays every launch: the peaks' 220 launches over
/// 1 GiB took 28 of a small case's 33 seconds under it, and an energy window's hundreds of runs
/// would be replayed too, measuring the tool, not the memory.
fn skip_peaks_reason(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<String> {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty() && v != "0");
    let why = if set(SKIP_PEAKS_ENV) {
        format!("{SKIP_PEAKS_ENV} is set")
    } else if set(NSIGHT_COMPUTE_ENV) {
        format!("running under Nsight Compute ({NSIGHT_COMPUTE_ENV} is set)")
    } else {
        return None;
    };
    Some(format!(
        "{why}: the peaks, the host link and the energy were not measured"
    ))
}

#[cfg(test)]
mod skip_peaks_tests {
    use super::*;
    use std::ffi::OsString;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            (pairs.iter())
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_peaks_are_skipped_when_asked_or_under_nsight_compute_and_not_otherwise() {
        assert_eq!(skip_peaks_reason(env(&[])), None);
        assert_eq!(skip_peaks_reason(env(&[(SKIP_PEAKS_ENV, "")])), None);
        assert_eq!(skip_peaks_reason(env(&[(SKIP_PEAKS_ENV, "0")])), None);
        let asked = skip_peaks_reason(env(&[(SKIP_PEAKS_ENV, "1")])).unwrap();
        assert!(asked.starts_with("KBENCH_SKIP_PEAKS is set:"), "{asked}");
        let ncu = skip_peaks_reason(env(&[(NSIGHT_COMPUTE_ENV, "/opt/nvidia/nsight-compute")]));
        assert!(ncu.unwrap().contains("running under Nsight Compute"));
        // Nothing else in the environment turns them off.
        assert_eq!(
            skip_peaks_reason(env(&[("CUDA_INJECTION64_PATH", "/x.so")])),
            None
        );
    }
}
