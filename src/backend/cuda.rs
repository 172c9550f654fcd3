//! The CUDA backend (cudarc, loading libcuda and libnvrtc at run time): opening the device and
//! fingerprinting it, compiling `kernels/*.cu` with NVRTC once per run, measuring the device's copy
//! bandwidth, and timing one case's samples with CUDA events in the manifest's scope.
//!
//! Without a driver nothing here is called: `Gpu::open` checks for the libraries first, because
//! cudarc panics (rather than erring) when they are missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUevent_flags};
use cudarc::driver::{
    result as driver_result, CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice,
    CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DriverError, ValidAsZeroBits,
};
use cudarc::nvrtc::{self, CompileError, CompileOptions, Ptx};
use serde::{Deserialize, Serialize};

use crate::algos::{Algorithm, CaseData, HostData, POISON_I32};
use crate::manifest::{CacheMode, DType, MeasureSettings, Scope};
use crate::measure::{self, Deadline, Measurement};
use crate::plan::Params;

/// Kernel sources built into the binary, so an installed kbench needs no source tree.
pub static EMBEDDED_KERNELS: &[(&str, &str)] = &[
    ("reduce.cu", include_str!("../../kernels/reduce.cu")),
    ("durbin.cu", include_str!("../../kernels/durbin.cu")),
];

/// Where kernel sources come from: the embedded set, or a directory the user named.
#[derive(Debug, Clone, Default)]
pub struct KernelSource {
    pub dir: Option<PathBuf>,
}

impl KernelSource {
    pub fn read(&self, file: &str) -> Result<String> {
        match &self.dir {
            Some(dir) => {
                let path = dir.join(file);
                std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read kernel source {}", path.display()))
            }
            None => EMBEDDED_KERNELS
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, src)| src.to_string())
                .ok_or_else(|| anyhow!("no embedded kernel file `{file}`")),
        }
    }

    pub fn describe(&self, file: &str) -> String {
        match &self.dir {
            Some(dir) => dir.join(file).display().to_string(),
            None => format!("kernels/{file} (embedded)"),
        }
    }
}

/// Whether the driver library can be loaded; `Err` holds the reason to show for skipped cases.
pub fn driver_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver on this machine)".into())
    }
}

pub fn nvrtc_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("NVRTC not found: libnvrtc.so.13 could not be loaded (install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` and add its lib directory to LD_LIBRARY_PATH)".into())
    }
}

pub fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; the library was checked present by the caller.
    unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| anyhow!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// Compiles one kernel file to PTX for `arch` (e.g. "sm_90"). The error carries NVRTC's log.
pub fn compile(file_label: &str, source: &str, arch: &str) -> Result<Ptx> {
    let options = CompileOptions {
        name: Some(file_label.to_string()),
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "-lineinfo".into(),
        ],
        ..Default::default()
    };
    nvrtc::compile_ptx_with_opts(source, options).map_err(|e| match e {
        CompileError::CompileError { log, .. } => {
            anyhow!(
                "NVRTC failed to compile {file_label} for {arch}:\n{}",
                log.to_string_lossy().trim_end()
            )
        }
        other => anyhow!("NVRTC failed on {file_label} for {arch}: {other:?}"),
    })
}

/// What the JSON records about the device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceFingerprint {
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub total_memory_bytes: u64,
    pub l2_cache_bytes: u64,
    pub sm_clock_mhz: f64,
    pub memory_clock_mhz: f64,
    pub memory_bus_width_bits: u32,
    /// From the memory clock and bus width: 2 transfers per clock.
    pub theoretical_memory_gbytes_per_s: f64,
    pub driver_version: String,
    pub nvrtc_version: String,
    /// A large device-to-device copy measured at the start of the run (bytes read + written).
    pub measured_copy_gbytes_per_s: f64,
}

/// An open device: context, stream, compiled modules and the buffers every case shares.
pub struct Gpu {
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    pub fingerprint: DeviceFingerprint,
    arch: String,
    kernels: KernelSource,
    /// Compiled modules by kernel file; a failed compile is kept so every case using it fails fast.
    modules: HashMap<String, Result<Arc<CudaModule>, String>>,
    /// Written before each cold sample: twice the L2 size, so nothing a case left there survives.
    l2_flush: CudaSlice<u8>,
}

impl Gpu {
    /// Opens device 0, or says why not.
    pub fn open(kernels: KernelSource) -> Result<Gpu, String> {
        driver_present()?;
        nvrtc_present()?;
        Gpu::open_checked(kernels).map_err(|e| format!("CUDA device unusable: {e:#}"))
    }

    fn open_checked(kernels: KernelSource) -> Result<Gpu> {
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
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) }
            .result()
            .map_err(driver_error)?;
        let (nvrtc_major, nvrtc_minor) = nvrtc_version()?;
        let memory_clock_mhz = attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64 / 1e3;
        let memory_bus_width_bits = attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as u32;
        let l2_cache_bytes = attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64;
        let l2_flush = stream
            .alloc_zeros::<u8>((2 * l2_cache_bytes).max(1 << 20) as usize)
            .map_err(driver_error)?;
        let mut gpu = Gpu {
            fingerprint: DeviceFingerprint {
                name: ctx.name().map_err(driver_error)?,
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
            },
            arch: format!("sm_{major}{minor}"),
            kernels,
            modules: HashMap::new(),
            l2_flush,
            ctx,
            stream,
        };
        gpu.fingerprint.measured_copy_gbytes_per_s = gpu.measure_copy_bandwidth()?;
        Ok(gpu)
    }

    /// Median of 20 device-to-device copies of 1 GiB (or an eighth of the memory, if smaller),
    /// counting bytes read plus bytes written, as peers.py counts its copy.
    fn measure_copy_bandwidth(&self) -> Result<f64> {
        let bytes = (1usize << 30).min(self.fingerprint.total_memory_bytes as usize / 8);
        let src = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_error)?;
        let mut dst = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_error)?;
        let mut times_s = Vec::new();
        for i in 0..23 {
            let start = self.event()?;
            self.stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(driver_error)?;
            let end = self.event()?;
            let ms = start.elapsed_ms(&end).map_err(driver_error)?;
            if i >= 3 {
                times_s.push(ms as f64 / 1e3);
            }
        }
        times_s.sort_by(f64::total_cmp);
        Ok(2.0 * bytes as f64 / times_s[times_s.len() / 2] / 1e9)
    }

    fn event(&self) -> Result<cudarc::driver::CudaEvent> {
        // Events need timing enabled explicitly: `None` creates them with timing disabled.
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_error)
    }

    /// After a kernel fault (illegal address, trap, launch failure) the context is unusable for
    /// good: every later call returns the same error. True when that has happened.
    pub fn is_broken(&self) -> bool {
        self.stream.synchronize().is_err() || self.ctx.check_err().is_err()
    }

    /// Refuses, with the numbers, a case whose data would not fit in the device's free memory
    /// (with the scratch a case may need on top, a quarter more).
    pub fn check_device_memory(&self, data_bytes: u64) -> Result<(), String> {
        let (free, _total) = self
            .ctx
            .mem_get_info()
            .map_err(|e| format!("{:#}", driver_error(e)))?;
        let needed = data_bytes.saturating_add(data_bytes / 4);
        if needed > free as u64 {
            return Err(format!(
                "too big for the device: needs about {:.2} GiB, {:.2} GiB of {} is free",
                needed as f64 / (1u64 << 30) as f64,
                free as f64 / (1u64 << 30) as f64,
                self.fingerprint.name
            ));
        }
        Ok(())
    }

    /// The module compiled from `file`, compiling it on first use.
    pub fn module(&mut self, file: &str) -> Result<Arc<CudaModule>> {
        if !self.modules.contains_key(file) {
            let built = self
                .kernels
                .read(file)
                .and_then(|src| compile(&self.kernels.describe(file), &src, &self.arch))
                .and_then(|ptx| self.ctx.load_module(ptx).map_err(driver_error))
                .map_err(|e| format!("{e:#}"));
            self.modules.insert(file.to_string(), built);
        }
        self.modules[file].clone().map_err(|e| anyhow!(e))
    }

    /// Times one case under `settings`: sets up the device buffers the scope leaves outside the
    /// timed region, takes the samples, and copies the last sample's output into `output`.
    pub fn time_case(
        &mut self,
        case: &GpuCase,
        settings: &MeasureSettings,
        deadline: Deadline,
        output: &mut HostData,
    ) -> Result<Measurement> {
        let module = self.module(case.algorithm.kernel_file())?;
        let stream = self.stream.clone();
        let sm_count = self.fingerprint.sm_count;
        let data = case.data;
        // Buffers that persist across samples in kernel scope.
        let mut resident = CudaRun::new(&stream, &module, sm_count, data, output.dtype())?;
        let mut host_output = output.clone();
        let l2_flush = &mut self.l2_flush;
        let measurement = measure::measure(settings, deadline, || {
            if settings.cache == CacheMode::Cold {
                stream.memset_zeros(l2_flush).map_err(driver_error)?;
            }
            resident.poison_output()?;
            let start = stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_error)?;
            match case.scope {
                Scope::Kernel => {
                    case.algorithm
                        .run_cuda(case.kernel, case.params, &mut resident)?
                }
                Scope::Transfers => {
                    resident.upload_inputs(data)?;
                    case.algorithm
                        .run_cuda(case.kernel, case.params, &mut resident)?;
                    resident.download_output(&mut host_output)?;
                }
                Scope::Program => {
                    let mut fresh = CudaRun::new(&stream, &module, sm_count, data, output.dtype())?;
                    case.algorithm
                        .run_cuda(case.kernel, case.params, &mut fresh)?;
                    fresh.download_output(&mut host_output)?;
                    // Freed inside the timed region, as the seed's whole program did.
                    drop(fresh);
                }
            }
            let end = stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_error)?;
            let ms = start.elapsed_ms(&end).map_err(driver_error)?;
            Ok(ms as f64 / 1e3)
        })?;
        match case.scope {
            Scope::Kernel => resident.download_output(output)?,
            Scope::Transfers | Scope::Program => *output = host_output,
        }
        stream.synchronize().map_err(driver_error)?;
        Ok(measurement)
    }
}

/// One CUDA case to time: which kernel of which algorithm, on what data, over which region.
pub struct GpuCase<'a> {
    pub algorithm: &'a dyn Algorithm,
    pub kernel: &'a str,
    pub params: &'a Params,
    pub data: &'a CaseData,
    pub scope: Scope,
}

/// Device buffers of one dtype.
pub enum DeviceData {
    I32(CudaSlice<i32>),
    F32(CudaSlice<f32>),
    F64(CudaSlice<f64>),
}

impl DeviceData {
    fn upload(stream: &Arc<CudaStream>, host: &HostData) -> Result<DeviceData> {
        // A zero-length allocation fails in the driver; keep one element so n = 0 cases run.
        fn up<T: DeviceRepr + ValidAsZeroBits>(
            stream: &Arc<CudaStream>,
            v: &[T],
        ) -> Result<CudaSlice<T>> {
            if v.is_empty() {
                stream.alloc_zeros::<T>(1).map_err(driver_error)
            } else {
                stream.clone_htod(v).map_err(driver_error)
            }
        }
        Ok(match host {
            HostData::I32(v) => DeviceData::I32(up(stream, v)?),
            HostData::F32(v) => DeviceData::F32(up(stream, v)?),
            HostData::F64(v) => DeviceData::F64(up(stream, v)?),
        })
    }

    fn copy_from(&mut self, stream: &Arc<CudaStream>, host: &HostData) -> Result<()> {
        match (self, host) {
            (_, h) if h.is_empty() => Ok(()),
            (DeviceData::I32(d), HostData::I32(h)) => {
                stream.memcpy_htod(h, d).map_err(driver_error)
            }
            (DeviceData::F32(d), HostData::F32(h)) => {
                stream.memcpy_htod(h, d).map_err(driver_error)
            }
            (DeviceData::F64(d), HostData::F64(h)) => {
                stream.memcpy_htod(h, d).map_err(driver_error)
            }
            _ => bail!("host and device buffers differ in dtype"),
        }
    }
}

/// What an algorithm's CUDA launcher works with: the stream, the compiled module, the inputs
/// already on the device, the output to write, and scratch buffers it may allocate.
pub struct CudaRun<'a> {
    pub stream: &'a Arc<CudaStream>,
    module: &'a Arc<CudaModule>,
    pub sm_count: u32,
    pub inputs: Vec<DeviceData>,
    pub output: DeviceData,
    /// Scratch by slot, allocated (zeroed) on first use and kept for later samples.
    pub scratch: Vec<Option<Scratch>>,
    /// Functions looked up in the module, kept for later samples.
    functions: HashMap<String, CudaFunction>,
}

/// A scratch buffer: partial sums of the case's dtype, or counters; or a CUDA graph captured from
/// a launcher's launches, with the device addresses it was captured against (replaying it after
/// one of those buffers was reallocated would touch freed memory); or the launch setting a
/// launcher worked out (and applied to its function) on its first run: a mode for the kernel and
/// the dynamic shared memory it needs.
pub enum Scratch {
    Data(DeviceData),
    U32(CudaSlice<u32>),
    Graph {
        graph: CudaGraph,
        addresses: Vec<u64>,
    },
    Launch {
        mode: i32,
        shared_bytes: u32,
    },
}

impl<'a> CudaRun<'a> {
    fn new(
        stream: &'a Arc<CudaStream>,
        module: &'a Arc<CudaModule>,
        sm_count: u32,
        data: &CaseData,
        output_dtype: DType,
    ) -> Result<CudaRun<'a>> {
        let inputs = data
            .inputs
            .iter()
            .map(|(_, h)| DeviceData::upload(stream, h))
            .collect::<Result<Vec<_>>>()?;
        let output = DeviceData::upload(
            stream,
            &HostData::zeros(output_dtype, data.output.len().max(1)),
        )?;
        Ok(CudaRun {
            stream,
            module,
            sm_count,
            inputs,
            output,
            scratch: Vec::new(),
            functions: HashMap::new(),
        })
    }

    /// The module's function `name`, looked up once per case, not in every timed sample.
    pub fn function(&mut self, name: &str) -> Result<CudaFunction> {
        if let Some(function) = self.functions.get(name) {
            return Ok(function.clone());
        }
        let function = self.module.load_function(name).map_err(|e| {
            anyhow!(
                "kernel `{name}` not found in the module: {}",
                driver_error(e)
            )
        })?;
        self.functions.insert(name.to_string(), function.clone());
        Ok(function)
    }

    /// Ensures scratch slot `slot` holds a zeroed buffer of at least `len` elements of `dtype`.
    pub fn ensure_data_scratch(&mut self, slot: usize, dtype: DType, len: usize) -> Result<()> {
        self.ensure_slot(slot);
        let fits = matches!(&self.scratch[slot], Some(Scratch::Data(d)) if d.len() >= len && d.dtype() == dtype);
        if !fits {
            let d = DeviceData::upload(self.stream, &HostData::zeros(dtype, len.max(1)))?;
            self.scratch[slot] = Some(Scratch::Data(d));
        }
        Ok(())
    }

    /// Ensures scratch slot `slot` holds a zeroed `u32` buffer of at least `len` elements.
    pub fn ensure_u32_scratch(&mut self, slot: usize, len: usize) -> Result<()> {
        self.ensure_slot(slot);
        let fits = matches!(&self.scratch[slot], Some(Scratch::U32(d)) if d.len() >= len);
        if !fits {
            self.scratch[slot] = Some(Scratch::U32(
                self.stream
                    .alloc_zeros::<u32>(len.max(1))
                    .map_err(driver_error)?,
            ));
        }
        Ok(())
    }

    /// Ensures scratch slot `slot` exists (possibly empty).
    pub fn ensure_slot(&mut self, slot: usize) {
        if self.scratch.len() <= slot {
            self.scratch.resize_with(slot + 1, || None);
        }
    }

    fn upload_inputs(&mut self, data: &CaseData) -> Result<()> {
        for (device, (_, host)) in self.inputs.iter_mut().zip(&data.inputs) {
            device.copy_from(self.stream, host)?;
        }
        Ok(())
    }

    /// Fills the output with NaN (floats) or an unlikely pattern (integers).
    fn poison_output(&mut self) -> Result<()> {
        let stream = self.stream;
        // SAFETY (all three): the pointer and byte count come from the same live allocation.
        match &mut self.output {
            DeviceData::I32(d) => {
                let n = d.len();
                let (ptr, _sync) = d.device_ptr_mut(stream);
                unsafe {
                    cudarc::driver::sys::cuMemsetD32Async(
                        ptr,
                        POISON_I32 as u32,
                        n,
                        stream.cu_stream(),
                    )
                }
                .result()
                .map_err(driver_error)
            }
            DeviceData::F32(d) => {
                let n = d.len();
                let (ptr, _sync) = d.device_ptr_mut(stream);
                unsafe {
                    cudarc::driver::sys::cuMemsetD32Async(
                        ptr,
                        f32::NAN.to_bits(),
                        n,
                        stream.cu_stream(),
                    )
                }
                .result()
                .map_err(driver_error)
            }
            DeviceData::F64(d) => {
                let bytes = d.len() * 8;
                let (ptr, _sync) = d.device_ptr_mut(stream);
                // All-ones bytes are a NaN in float64.
                unsafe { driver_result::memset_d8_async(ptr, 0xFF, bytes, stream.cu_stream()) }
                    .map_err(driver_error)
            }
        }
    }

    fn download_output(&self, host: &mut HostData) -> Result<()> {
        let n = host.len();
        match (&self.output, host) {
            (_, _) if n == 0 => Ok(()),
            (DeviceData::I32(d), HostData::I32(h)) => self
                .stream
                .memcpy_dtoh(&d.slice(0..n), h)
                .map_err(driver_error),
            (DeviceData::F32(d), HostData::F32(h)) => self
                .stream
                .memcpy_dtoh(&d.slice(0..n), h)
                .map_err(driver_error),
            (DeviceData::F64(d), HostData::F64(h)) => self
                .stream
                .memcpy_dtoh(&d.slice(0..n), h)
                .map_err(driver_error),
            _ => bail!("output dtype mismatch"),
        }
    }
}

impl DeviceData {
    pub fn len(&self) -> usize {
        match self {
            DeviceData::I32(d) => d.len(),
            DeviceData::F32(d) => d.len(),
            DeviceData::F64(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's device address, for recognising it later (a captured graph's key).
    pub fn device_address(&self, stream: &Arc<CudaStream>) -> u64 {
        match self {
            DeviceData::I32(d) => d.device_ptr(stream).0,
            DeviceData::F32(d) => d.device_ptr(stream).0,
            DeviceData::F64(d) => d.device_ptr(stream).0,
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            DeviceData::I32(_) => DType::I32,
            DeviceData::F32(_) => DType::F32,
            DeviceData::F64(_) => DType::F64,
        }
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

/// Compiles every embedded kernel file for each architecture without a GPU: the CI check.
/// Returns (file, arch, PTX) for each, or the first compile error.
pub fn compile_all(
    kernels: &KernelSource,
    archs: &[String],
) -> Result<Vec<(String, String, String)>> {
    nvrtc_present().map_err(|e| anyhow!(e))?;
    let mut out = Vec::new();
    for (file, _) in EMBEDDED_KERNELS {
        let src = kernels.read(file)?;
        for arch in archs {
            let ptx = compile(&kernels.describe(file), &src, arch)?;
            out.push((file.to_string(), arch.clone(), ptx.to_src()));
        }
    }
    Ok(out)
}

/// One kernel's resources as ptxas reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtxasReport {
    pub kernel: String,
    pub arch: String,
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub stack_bytes: u32,
    pub shared_bytes: u32,
}

/// Assembles PTX with `ptxas -v` and parses its per-kernel report (ptxas writes it to stderr).
pub fn ptxas_report(ptxas: &Path, ptx_path: &Path, arch: &str) -> Result<Vec<PtxasReport>> {
    let out = std::process::Command::new(ptxas)
        .args([&format!("-arch={arch}"), "-v"])
        .arg(ptx_path)
        .args(["-o", "/dev/null"])
        .output()
        .with_context(|| format!("cannot run {}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("ptxas failed on {}:\n{text}", ptx_path.display());
    }
    Ok(parse_ptxas(&text, arch))
}

pub fn parse_ptxas(text: &str, arch: &str) -> Vec<PtxasReport> {
    let number_before = |line: &str, word: &str| -> u32 {
        line.split(',')
            .find(|part| part.contains(word))
            .and_then(|part| part.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or(0)
    };
    let mut reports: Vec<PtxasReport> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let kernel = rest.split('\'').next().unwrap_or_default().to_string();
            reports.push(PtxasReport {
                kernel,
                arch: arch.to_string(),
                registers: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                stack_bytes: 0,
                shared_bytes: 0,
            });
        } else if let Some(r) = reports.last_mut() {
            if line.contains("bytes stack frame") {
                r.stack_bytes = number_before(line, "stack frame");
                r.spill_store_bytes = number_before(line, "spill stores");
                r.spill_load_bytes = number_before(line, "spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                r.registers = line
                    .split("Used ")
                    .nth(1)
                    .and_then(|s| s.split_whitespace().next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                r.shared_bytes = number_before(line, "bytes smem");
            }
        }
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'block_sum' for 'sm_90'\n\
ptxas info    : Function properties for block_sum\n\
    256 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 2048 bytes smem\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
ptxas info    : Function properties for saxpy\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, used 0 barriers\n";
        let r = parse_ptxas(text, "sm_90");
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            PtxasReport {
                kernel: "block_sum".into(),
                arch: "sm_90".into(),
                registers: 32,
                spill_store_bytes: 8,
                spill_load_bytes: 4,
                stack_bytes: 256,
                shared_bytes: 2048
            }
        );
        assert_eq!(
            (r[1].kernel.as_str(), r[1].registers, r[1].shared_bytes),
            ("saxpy", 10, 0)
        );
    }
}
