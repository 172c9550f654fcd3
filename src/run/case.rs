//! One case, run in this process (inside a `kbench worker`): check that it fits, prepare its
//! data, resolve its CPU implementation or CUDA launcher, time it under the stopping rule, check
//! every output against its reference, and summarize. Errors and panics become the case's status
//! and reason; nothing here aborts a study.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::algos::{BoundCase, Buffers, CaseData};
use crate::device::cupti_profiler::MAX_PROFILED_LAUNCHES;
use crate::device::mock::{MockCase, MockDevice, MockSpec};
use crate::device::timer::{batch_runs, SamplePlan, PROFILED_RUNS};
use crate::device::{
    fits_memory, Device, DeviceBuf, DeviceIo, KernelSource, Launcher, PinnedBuf, CHUNK_ALIGN,
};
use crate::manifest::Manifest;
use crate::measure::{self, Deadline, Measured, Taken};
use crate::plan::Case;
use crate::schema::{
    CaseResult, CaseStatus, ClockRecord, DeviceFingerprint, GpuTimer, MeasureSettings, OutputCheck,
    StopReason, TimerMethod,
};
use crate::stats;
use crate::verify;
use crate::vocab::{describe_params, Backend, CacheMode, HostData, HostMemory, Scope, TimingMode};

/// When `--save-outputs` writes a case's inputs and outputs as `.npy` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
pub enum SaveOutputs {
    Failed,
    All,
}

/// What a case needs from the study beyond its manifest.
pub struct CaseSettings<'a> {
    pub measure: &'a MeasureSettings,
    pub save_outputs: Option<SaveOutputs>,
    /// Where `--save-outputs` puts its files: beside this results file.
    pub results_path: &'a std::path::Path,
}

/// Where a case is, for the worker's parent: the time limit starts at `Measuring`; after
/// `Measured` only checking the answer and saving it remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseStage {
    Measuring,
    Measured,
}

/// A worker's GPU, opened the first time a CUDA case needs it: a real one, or the mock device
/// (`device::mock`) where KBENCH_MOCK_GPU names one.
pub enum GpuState {
    NotOpened(KernelSource),
    MockNotOpened(Box<MockSpec>),
    Open(Box<Device>),
    Mock(Box<MockDevice>),
    Unavailable(String),
}

/// The open GPU a CUDA case runs on.
enum OpenGpu<'a> {
    Cuda(&'a mut Device),
    Mock(&'a mut MockDevice),
}

/// What the worker's parent hears of the GPU after a case.
pub struct GpuReport {
    pub device: Option<DeviceFingerprint>,
    /// Why CUDA cases cannot run here.
    pub unavailable: Option<String>,
    /// The context is unusable for good (a kernel fault): the worker must not run another case.
    pub broken: bool,
}

impl GpuState {
    /// The GPU the worker opens when a CUDA case first needs it: the mock, if `mock` is set.
    pub fn new(kernels: KernelSource, mock: Option<MockSpec>) -> GpuState {
        match mock {
            Some(spec) => GpuState::MockNotOpened(Box::new(spec)),
            None => GpuState::NotOpened(kernels),
        }
    }

    fn get(&mut self) -> Result<OpenGpu<'_>, String> {
        match self {
            GpuState::NotOpened(kernels) => {
                *self = match Device::open(kernels.clone()) {
                    Ok(device) => GpuState::Open(Box::new(device)),
                    Err(reason) => GpuState::Unavailable(reason),
                };
            }
            GpuState::MockNotOpened(spec) => {
                *self = GpuState::Mock(Box::new(MockDevice::open((**spec).clone())));
            }
            _ => {}
        }
        match self {
            GpuState::Open(device) => Ok(OpenGpu::Cuda(device)),
            GpuState::Mock(mock) => Ok(OpenGpu::Mock(mock)),
            GpuState::Unavailable(reason) => Err(reason.clone()),
            GpuState::NotOpened(_) | GpuState::MockNotOpened(_) => unreachable!("opened above"),
        }
    }

    /// The device as the results record it, after a case that ended with `status`.
    pub fn report(&self, status: CaseStatus) -> GpuReport {
        let errored = status == CaseStatus::Error;
        let (device, unavailable, broken) = match self {
            GpuState::Open(open) => (
                Some(open.fingerprint.clone()),
                None,
                errored && open.is_broken(),
            ),
            GpuState::Mock(mock) => (
                Some(mock.fingerprint.clone()),
                None,
                errored && mock.is_broken(),
            ),
            GpuState::Unavailable(reason) => (None, Some(reason.clone()), false),
            GpuState::NotOpened(_) | GpuState::MockNotOpened(_) => (None, None, false),
        };
        GpuReport {
            device,
            unavailable,
            broken,
        }
    }
}

/// A case's record before it has run.
pub fn new_result(manifest: &Manifest, case: &Case) -> CaseResult {
    let variant = &manifest.variants[case.variant];
    CaseResult {
        index: case.index,
        variant: variant.name.clone(),
        backend: variant.backend,
        implementation: variant.implementation.clone(),
        scope: (variant.backend == Backend::Cuda).then_some(variant.scope),
        host_memory: (variant.backend == Backend::Cuda && variant.scope != Scope::Kernel)
            .then_some(variant.host_memory),
        params: case.params.clone(),
        status: CaseStatus::Error,
        reason: None,
        bytes_moved: 0,
        flops: 0,
        summary: None,
        gbytes_per_s: None,
        gflops_per_s: None,
        measurement: None,
        outputs: Vec::new(),
        facts: Default::default(),
        saved_files: Vec::new(),
        wall_s: 0.0,
        device: None,
    }
}

/// Runs one case in this process. `on_stage` hears of each stage the case reaches.
pub fn run_case(
    manifest: &Manifest,
    case: &Case,
    gpu: &mut GpuState,
    settings: &CaseSettings,
    on_stage: &mut dyn FnMut(CaseStage),
) -> CaseResult {
    let mut result = new_result(manifest, case);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        measure_case(manifest, case, gpu, settings, on_stage, &mut result)
    }));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            result.status = CaseStatus::Error;
            result.reason = Some(format!("{e:#}"));
        }
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            result.status = CaseStatus::Error;
            result.reason = Some(format!("kbench bug: the case panicked: {text}"));
        }
    }
    result
}

fn measure_case(
    manifest: &Manifest,
    case: &Case,
    gpu: &mut GpuState,
    settings: &CaseSettings,
    on_stage: &mut dyn FnMut(CaseStage),
    result: &mut CaseResult,
) -> Result<()> {
    let variant = &manifest.variants[case.variant];
    let bound = manifest.algorithm.bind(&case.params)?;
    let measure_settings = settings.measure;

    let device = match variant.backend {
        Backend::Cpu => None,
        Backend::Cuda => match gpu.get() {
            Ok(device) => Some(device),
            Err(reason) => {
                result.status = CaseStatus::Skipped;
                result.reason = Some(reason);
                return Ok(());
            }
        },
    };
    if let Some(OpenGpu::Mock(mock)) = &device {
        if let Some(reason) = mock.skip(&variant.name, &case.params) {
            result.status = CaseStatus::Skipped;
            result.reason = Some(reason);
            return Ok(());
        }
    }

    on_stage(CaseStage::Measuring);
    let deadline = Deadline::after(measure_settings.timeout_s);
    let footprint = bound
        .footprint_bytes(&variant.implementation)
        .ok_or_else(|| {
            anyhow!(
                "the case's size overflows 64-bit arithmetic: {}",
                describe_params(&case.params)
            )
        })?;
    if let Some(device) = &device {
        let fits = match device {
            OpenGpu::Cuda(device) => device.check_memory(footprint),
            OpenGpu::Mock(mock) => {
                fits_memory(footprint, mock.free_memory_bytes(), &mock.fingerprint.name)
            }
        };
        if let Err(reason) = fits {
            result.status = CaseStatus::Skipped;
            result.reason = Some(reason);
            return Ok(());
        }
    }
    check_host_memory(footprint)?;

    let mut data = bound.prepare(manifest.study.seed)?;
    for output in &mut data.outputs {
        output.tolerance = bound
            .tolerance(&variant.implementation, output)
            .with_overrides(output.dtype, &manifest.accuracy);
    }
    result.bytes_moved = data.bytes_moved;
    result.flops = data.flops;
    result.facts = data
        .facts
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();

    let (measured, mut outputs, gpu_timer) = match device {
        None => {
            let mut run = bound.cpu(&variant.implementation)?;
            let mut outputs = data.output_buffers();
            let measured = measure::measure(measure_settings, deadline, || {
                data.reset_outputs(&mut outputs);
                let start = Instant::now();
                run(&data.inputs, &mut outputs)?;
                Ok(Taken::clean(start.elapsed().as_secs_f64()))
            })?;
            (measured, outputs, None)
        }
        Some(OpenGpu::Mock(mock)) => {
            let (measured, outputs, timer) = mock.run(&MockCase {
                variant: &variant.name,
                params: &case.params,
                scope: variant.scope,
                kernel_file: &manifest.algorithm.spec().kernel_file,
                data: &data,
                settings: measure_settings,
                deadline,
            })?;
            (measured, outputs, Some(timer))
        }
        Some(OpenGpu::Cuda(device)) => {
            let module = device.module(&manifest.algorithm.spec().kernel_file)?;
            let device: &Device = device;
            let timing = CudaTiming {
                device,
                host_memory: variant.host_memory,
                streams: variant.streams as usize,
                gpu: device.gpu(&module),
                bound: &*bound,
                kernel: &variant.implementation,
                data: &data,
                settings: measure_settings,
                deadline,
            };
            let (measured, outputs, timer) = timing.run(variant.scope)?;
            (measured, outputs, Some(timer))
        }
    };
    on_stage(CaseStage::Measured);
    let Measured {
        mut measurement,
        second_timer_s,
    } = measured;
    if let Some(mut timer) = gpu_timer {
        finish_timer_record(
            &mut timer,
            &measurement.samples_s,
            second_timer_s,
            measure_settings,
        );
        measurement.gpu_timer = Some(timer);
    }

    if measurement.stop_reason == StopReason::TimedOut {
        result.status = CaseStatus::TimedOut;
        result.reason = Some(format!(
            "still running at its time limit of {} s; {} samples kept",
            measure_settings.timeout_s,
            measurement.samples_s.len()
        ));
        if measurement.samples_s.is_empty() {
            result.measurement = Some(measurement);
            return Ok(());
        }
    }
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(data.bytes_moved as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(data.flops as f64 / summary.median_s / 1e9);
    result.summary = Some(summary);
    result.measurement = Some(measurement);

    // An output whose length depends on the data is cut to its count; a count that cannot be
    // right fails the case, as a wrong answer.
    let trimmed = data.trim_outputs(&mut outputs);
    result.outputs = data
        .outputs
        .iter()
        .map(|spec| {
            let got = outputs
                .data(spec.name)
                .map(HostData::to_f64)
                .unwrap_or_default();
            OutputCheck {
                name: spec.name.to_string(),
                length: got.len(),
                accuracy: match &spec.checked {
                    None => verify::compare(&got, &spec.reference, spec.tolerance),
                    Some(indices) => {
                        verify::compare_at(&got, indices, &spec.reference, spec.tolerance)
                    }
                },
            }
        })
        .collect();
    let wrong: Vec<String> = result
        .outputs
        .iter()
        .filter(|o| !o.accuracy.passed)
        .map(|o| {
            let a = &o.accuracy;
            let checked = match a.subset_of {
                Some(of) => format!(" checked (a subset of its {of})"),
                None => String::new(),
            };
            format!(
                "`{}`: {} of {} elements{checked} outside tolerance (max rel err {:.3e}, rel tol {:.1e}, max abs err {:.3e}, abs tol {:.1e})",
                o.name, a.wrong_elements, a.elements, a.max_rel_err, a.tolerance.rel, a.max_abs_err, a.tolerance.abs
            )
        })
        .collect();
    let passed = wrong.is_empty() && trimmed.is_ok();
    // A wrong answer outranks a time limit; a right one does not clear it.
    if !passed {
        result.status = CaseStatus::AccuracyFailed;
        result.reason = Some(match trimmed {
            Err(e) => format!("wrong answer: {e:#}"),
            Ok(()) => format!("wrong answer: {}", wrong.join("; ")),
        });
    } else if result.status != CaseStatus::TimedOut {
        result.status = CaseStatus::Passed;
    }
    let save = match settings.save_outputs {
        Some(SaveOutputs::All) => true,
        Some(SaveOutputs::Failed) => !passed,
        None => false,
    };
    if save {
        let references: Vec<(String, HostData)> = data
            .outputs
            .iter()
            .map(|o| {
                (
                    format!("{}.reference", o.name),
                    HostData::F64(o.reference.clone()),
                )
            })
            .collect();
        let mut arrays: Vec<(String, &HostData)> = data
            .inputs
            .0
            .iter()
            .map(|(name, h)| (format!("input.{name}"), h))
            .collect();
        arrays.extend(
            outputs
                .0
                .iter()
                .map(|(name, h)| (format!("output.{name}"), h)),
        );
        arrays.extend(references.iter().map(|(name, h)| (name.clone(), h)));
        result.saved_files =
            crate::results::save_arrays(settings.results_path, case.index, &variant.name, &arrays)?;
    }
    Ok(())
}

/// A profiled run's cost beyond its kernels, for deciding whether the profiled runs fit in the
/// case's time limit: the profiler's set-up, decoding and a few synchronizations. A generous
/// allowance, not a measurement.
const PROFILED_RUN_OVERHEAD_S: f64 = 0.05;

/// How many chunks each stream takes when transfers overlap kernels: enough that the first
/// chunk's copy in and the last one's copy out, which nothing overlaps, are a small part.
const CHUNKS_PER_STREAM: usize = 4;

/// The element ranges (first, count) that `streams` streams split a case's transfers into:
/// `streams * CHUNKS_PER_STREAM` near-equal chunks starting at multiples of `CHUNK_ALIGN`.
/// Only a case whose inputs and outputs all have the same length can be split (element i of
/// each belongs together).
fn chunks(data: &CaseData, streams: usize) -> Result<Vec<(usize, usize)>> {
    let lengths: Vec<usize> = (data.inputs.0.iter().map(|(_, h)| h.len()))
        .chain(data.outputs.iter().map(|o| o.capacity))
        .collect();
    let n = lengths.first().copied().unwrap_or(0);
    if lengths.iter().any(|&len| len != n) {
        bail!(
            "`streams` splits a case's arrays into chunks of the same elements, but its arrays \
             have different lengths ({lengths:?})"
        );
    }
    Ok(chunk_ranges(n, streams * CHUNKS_PER_STREAM, CHUNK_ALIGN))
}

/// `n` elements in at most `pieces` ranges of near-equal size, each starting at a multiple of
/// `align` (the last takes the rest); none empty, except the one range of an empty array.
fn chunk_ranges(n: usize, pieces: usize, align: usize) -> Vec<(usize, usize)> {
    let size = n.div_ceil(pieces.max(1)).div_ceil(align).max(1) * align;
    let mut ranges: Vec<(usize, usize)> = (0..n)
        .step_by(size)
        .map(|first| (first, size.min(n - first)))
        .collect();
    if ranges.is_empty() {
        ranges.push((0, 0));
    }
    ranges
}

/// Timing one CUDA case.
struct CudaTiming<'a> {
    device: &'a Device,
    /// Where transfers copy from and to.
    host_memory: HostMemory,
    /// Streams the transfers' copies and kernels are split over, chunk by chunk (pinned only).
    streams: usize,
    gpu: crate::device::Gpu<'a>,
    bound: &'a dyn BoundCase,
    kernel: &'a str,
    data: &'a CaseData,
    settings: &'a MeasureSettings,
    deadline: Deadline,
}

impl CudaTiming<'_> {
    /// Times the case in `scope`; returns the measurement, the outputs of the last sample, and the
    /// timer's record (completed by `finish_timer_record`).
    fn run(&self, scope: Scope) -> Result<(Measured, Buffers, GpuTimer)> {
        let cold_l2 = self.settings.cache == CacheMode::Cold;
        let mut timer = GpuTimer::new(TimerMethod::Events, 1, cold_l2);
        let mut clocks: Vec<crate::device::nvml::ClockReading> = Vec::new();
        let mut outputs = self.data.output_buffers();
        let measured = match scope {
            Scope::Kernel => {
                let io = self.allocate()?;
                for (name, host) in &self.data.inputs.0 {
                    io.input(name)?.copy_from_host(host)?;
                }
                let mut launcher = self.bound.cuda(self.kernel, self.gpu, &io)?;
                let plan = self.plan(&io, &mut *launcher, &mut timer)?;
                let measured = measure::measure(self.settings, self.deadline, || {
                    let sample = self.device.sample_kernel(&io, &mut *launcher, &plan)?;
                    clocks.extend(sample.clocks);
                    Ok(taken(&sample))
                })?;
                download(&io, &mut outputs)?;
                self.profile(&io, &mut *launcher, &measured, &mut timer)?;
                measured
            }
            Scope::Transfers => {
                // The device buffers and the launcher persist; each sample copies the inputs
                // over, runs, and copies the outputs back, from and to pageable host memory (the
                // case's own buffers) or page-locked copies of them.
                let io = self.allocate()?;
                let targets = self.targets(&io)?;
                let mut launcher = self.bound.cuda(self.kernel, self.gpu, &io)?;
                match self.host_memory {
                    HostMemory::Pageable => measure::measure(self.settings, self.deadline, || {
                        io.reset_outputs()?;
                        let sample = self.device.sample_region(cold_l2, &mut |_| {
                            for (host, device) in &targets {
                                device.copy_from_host(host)?;
                            }
                            launcher.launch()?;
                            download(&io, &mut outputs)
                        })?;
                        clocks.extend(sample.clocks);
                        Ok(taken(&sample))
                    })?,
                    HostMemory::Pinned => {
                        let pinned_in = targets
                            .iter()
                            .map(|(host, _)| PinnedBuf::copy_of(self.device, host))
                            .collect::<Result<Vec<_>>>()?;
                        let pinned_out = outputs
                            .0
                            .iter()
                            .map(|(name, host)| {
                                Ok((io.output(name)?, PinnedBuf::copy_of(self.device, host)?))
                            })
                            .collect::<Result<Vec<_>>>()?;
                        let (streams, chunks) = match self.streams {
                            1 => (Vec::new(), Vec::new()),
                            count => (self.device.new_streams(count)?, chunks(self.data, count)?),
                        };
                        let measured = measure::measure(self.settings, self.deadline, || {
                            io.reset_outputs()?;
                            let sample = self.device.sample_region(cold_l2, &mut |device| {
                                if streams.is_empty() {
                                    for ((_, target), pinned) in targets.iter().zip(&pinned_in) {
                                        target.copy_from_pinned(pinned)?;
                                    }
                                    launcher.launch()?;
                                    for (output, pinned) in &pinned_out {
                                        output.copy_to_pinned(pinned)?;
                                    }
                                    return Ok(());
                                }
                                // Chunk c's copies in, its kernel and its copies out go in order
                                // on stream c % streams, so one chunk's kernel and copy out
                                // overlap the next chunks' copies in (the link copies both
                                // ways at once).
                                for stream in &streams {
                                    stream.follow(device)?;
                                }
                                for (&chunk, stream) in chunks.iter().zip(streams.iter().cycle()) {
                                    for ((_, target), pinned) in targets.iter().zip(&pinned_in) {
                                        target.copy_chunk_from_pinned(pinned, chunk, stream)?;
                                    }
                                    launcher.launch_chunk(chunk.0, chunk.1, stream)?;
                                    for (output, pinned) in &pinned_out {
                                        output.copy_chunk_to_pinned(pinned, chunk, stream)?;
                                    }
                                }
                                for stream in &streams {
                                    device.join(stream)?;
                                }
                                Ok(())
                            })?;
                            clocks.extend(sample.clocks);
                            Ok(taken(&sample))
                        })?;
                        for ((_, host), (_, pinned)) in outputs.0.iter_mut().zip(&pinned_out) {
                            pinned.copy_to(host)?;
                        }
                        measured
                    }
                }
            }
            Scope::Program => measure::measure(self.settings, self.deadline, || {
                let sample = self.device.sample_region(cold_l2, &mut |_| {
                    // Allocation, copies, the launcher's own setup, kernels, copy back and
                    // free: the seed's whole program.
                    let io = self.allocate()?;
                    for (host, device) in self.targets(&io)? {
                        device.copy_from_host(host)?;
                    }
                    let mut launcher = self.bound.cuda(self.kernel, self.gpu, &io)?;
                    launcher.launch()?;
                    download(&io, &mut outputs)?;
                    // Freed inside the timed region, as the seed's whole program did.
                    drop(launcher);
                    drop(io);
                    Ok(())
                })?;
                clocks.extend(sample.clocks);
                Ok(taken(&sample))
            })?,
        };
        if !clocks.is_empty() {
            let mut reasons: Vec<String> = clocks.iter().flat_map(|c| c.reason_names()).collect();
            reasons.sort();
            reasons.dedup();
            timer.clocks = Some(ClockRecord {
                sm_clock_min_mhz: clocks.iter().map(|c| c.sm_clock_mhz).min().unwrap_or(0),
                sm_clock_max_mhz: clocks.iter().map(|c| c.sm_clock_mhz).max().unwrap_or(0),
                throttle_reasons: reasons,
            });
        }
        Ok((measured, outputs, timer))
    }

    /// Zeroed device buffers for the inputs, and for the outputs at their capacity.
    fn allocate(&self) -> Result<DeviceIo> {
        let inputs = self
            .data
            .inputs
            .0
            .iter()
            .map(|(name, host)| Ok((*name, self.device.alloc(host.dtype(), host.len())?)))
            .collect::<Result<_>>()?;
        let outputs = self
            .data
            .outputs
            .iter()
            .map(|o| Ok((o.name, self.device.alloc(o.dtype, o.capacity)?)))
            .collect::<Result<_>>()?;
        let in_place = self
            .data
            .outputs
            .iter()
            .filter_map(|o| Some((o.name, o.in_place?)))
            .collect();
        Ok(DeviceIo {
            inputs,
            outputs,
            in_place,
        })
    }

    /// Where each host input is copied when transfers are timed: its own buffer, or straight
    /// into the output computed in place over it (copying it into its own buffer too would
    /// move its bytes twice).
    fn targets<'io>(&'io self, io: &'io DeviceIo) -> Result<Vec<(&'io HostData, &'io DeviceBuf)>> {
        self.data
            .inputs
            .0
            .iter()
            .map(|(name, host)| {
                let target = match io.in_place.iter().find(|(_, input)| input == name) {
                    Some((output, _)) => io.output(output)?,
                    None => io.input(name)?,
                };
                Ok((host, target))
            })
            .collect()
    }

    /// How kernel-scope samples are taken: single (held, flushed if cold) or a batch of runs
    /// sized from a few single runs.
    fn plan(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        timer: &mut GpuTimer,
    ) -> Result<SamplePlan> {
        let launches = launcher.launches_per_run();
        let refused = launcher.waits_for_device().or(self.device.hold_refused());
        let (plan, unheld) = match self.settings.mode {
            TimingMode::Single => SamplePlan::single(timer.cold_l2, launches, refused),
            TimingMode::Batch => {
                let (one, _) = SamplePlan::single(false, launches, refused);
                let mut fastest = f64::INFINITY;
                for _ in 0..3 {
                    fastest = fastest.min(
                        self.device
                            .sample_kernel(io, launcher, &one)?
                            .seconds_per_run,
                    );
                }
                let runs = batch_runs(self.settings.batch_min_window_s, fastest, launches);
                timer.cold_l2 = false;
                SamplePlan::batch(runs, launches, refused)
            }
        };
        timer.method = match (self.settings.mode, plan.hold) {
            (TimingMode::Batch, _) => TimerMethod::BatchEvents,
            (TimingMode::Single, true) => TimerMethod::BlockedEvents,
            (TimingMode::Single, false) => TimerMethod::Events,
        };
        timer.unblocked_reason = unheld;
        timer.runs_per_sample = plan.runs;
        Ok(plan)
    }
}

impl CudaTiming<'_> {
    /// Adds a few runs timed by CUPTI's range profiler to the record, where the device has the
    /// profiler and the case's runs can be profiled; else says why not. A profiler that fails
    /// costs only its own record (the samples stand), unless the GPU faulted: then the case
    /// fails, as it would have on its next run.
    fn profile(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        measured: &Measured,
        timer: &mut GpuTimer,
    ) -> Result<()> {
        if !self.device.has_profiler() {
            return Ok(());
        }
        timer.profiler_skipped = match profiler_skip_reason(
            self.settings.mode,
            launcher.waits_for_device(),
            launcher.launches_per_run(),
            &measured.measurement.samples_s,
            self.deadline.remaining().as_secs_f64(),
        ) {
            Some(why) => Some(why),
            None if self.device.profiler_is_blind() => Some(
                "an earlier case's profiled run saw no kernel (after a CUDA graph launch CUPTI's range profiler sees none in this worker)".to_string(),
            ),
            None => match self.device.profile_kernel(io, launcher, timer.cold_l2) {
                Ok(runs) if runs.iter().any(|&(_, kernels)| kernels == 0) => Some(
                    "the profiler saw no kernel in a run (it sees none in a CUDA graph launch)"
                        .to_string(),
                ),
                Ok(runs) => {
                    timer.profiler_samples_s = runs.iter().map(|&(s, _)| s).collect();
                    timer.profiler_kernels_per_run = runs.iter().map(|&(_, k)| k as u32).max();
                    None
                }
                Err(e) if self.device.is_broken() => return Err(e),
                Err(e) => Some(format!("the profiled runs failed: {e:#}")),
            },
        };
        Ok(())
    }
}

/// Why a kernel-scope case's runs are not profiled, if they are not: the mode, the run's shape,
/// or the time left before the case's limit (the samples must not be lost to a profiler).
fn profiler_skip_reason(
    mode: TimingMode,
    waits_for_device: Option<&str>,
    launches_per_run: usize,
    samples_s: &[f64],
    left_s: f64,
) -> Option<String> {
    if samples_s.is_empty() {
        return Some("no sample was taken".to_string());
    }
    // A profiled run: its kernels replayed alone, a flush and a few synchronizations.
    let run_s_estimate = 3.0 * stats::summarize(samples_s).median_s + PROFILED_RUN_OVERHEAD_S;
    if run_s_estimate * PROFILED_RUNS as f64 > left_s {
        Some(format!(
            "{PROFILED_RUNS} profiled runs of about {run_s_estimate:.3} s would not fit in the {left_s:.1} s left of the case's time limit"
        ))
    } else if mode == TimingMode::Batch {
        Some("batch mode: its samples are hot runs back to back, a profiled kernel runs alone and cold".to_string())
    } else if let Some(why) = waits_for_device {
        Some(why.to_string())
    } else if launches_per_run > MAX_PROFILED_LAUNCHES {
        Some(format!(
            "a run queues {launches_per_run} launches, more than the {MAX_PROFILED_LAUNCHES} a profiled run may"
        ))
    } else {
        None
    }
}

fn taken(sample: &crate::device::timer::Sample) -> Taken {
    Taken {
        seconds: sample.seconds_per_run,
        throttled: sample.clocks.is_some_and(|c| c.throttled()),
        second_timer_s: sample.cupti_seconds_per_run,
    }
}

/// Copies every output buffer back into `outputs`.
fn download(io: &DeviceIo, outputs: &mut Buffers) -> Result<()> {
    for (name, host) in &mut outputs.0 {
        io.output(name)?.copy_to_host(host)?;
    }
    Ok(())
}

/// Adds CUPTI's samples and the verdict of the other timers on the events to the record. The
/// profiler times a run of one kernel as the events do (launch processing included), so it
/// judges those; CUPTI's activity span (which starts at the first block) judges the rest.
fn finish_timer_record(
    timer: &mut GpuTimer,
    samples_s: &[f64],
    cupti_s: Vec<f64>,
    settings: &MeasureSettings,
) {
    timer.timers_disagree = false;
    if !samples_s.is_empty() {
        let events = stats::summarize(samples_s).median_s;
        let allowed = (settings.timer_tolerance * events).max(settings.timer_tolerance_s);
        let mut judge = None;
        if !cupti_s.is_empty() {
            let cupti = stats::summarize(&cupti_s).median_s;
            timer.cupti_vs_events = Some(cupti / events - 1.0);
            timer.cupti_minus_events_s = Some(cupti - events);
            judge = Some(cupti);
        }
        if !timer.profiler_samples_s.is_empty() {
            let profiler = stats::summarize(&timer.profiler_samples_s).median_s;
            timer.profiler_vs_events = Some(profiler / events - 1.0);
            if timer.profiler_kernels_per_run == Some(1) {
                judge = Some(profiler);
            }
        }
        timer.timers_disagree = judge.is_some_and(|other| (other - events).abs() > allowed);
    }
    timer.cupti_samples_s = cupti_s;
}

/// Refuses a case whose data would not fit in the memory the machine has free, before allocating
/// it (an allocation failure would abort the worker).
fn check_host_memory(bytes: u64) -> Result<()> {
    let Some(available) = crate::env::host_memory_headroom_bytes() else {
        return Ok(());
    };
    if bytes > available {
        anyhow::bail!(
            "needs {:.2} GiB of host memory for its data, only {:.2} GiB is available",
            bytes as f64 / GIB,
            available as f64 / GIB
        );
    }
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_array_once_in_order_from_aligned_starts() {
        for (n, pieces) in [
            (0, 8),
            (1, 8),
            (255, 4),
            (256, 4),
            (1_000_003, 16),
            (4096, 16),
            (7, 1),
        ] {
            let ranges = chunk_ranges(n, pieces, 256);
            assert!(ranges.len() <= pieces.max(1), "{n} {pieces}: {ranges:?}");
            let mut next = 0;
            for &(first, count) in &ranges {
                assert_eq!(first, next, "{n} {pieces}: {ranges:?}");
                assert_eq!(first % 256, 0);
                assert!(count > 0 || n == 0);
                next = first + count;
            }
            assert_eq!(next, n, "{n} {pieces}: {ranges:?}");
        }
        assert_eq!(chunk_ranges(1_000_003, 16, 256).len(), 16);
    }

    #[test]
    fn runs_are_profiled_only_in_single_mode_within_the_launch_cap_and_the_time_left() {
        let single = TimingMode::Single;
        let ms = [1e-3; 5];
        assert_eq!(profiler_skip_reason(single, None, 1, &ms, 60.0), None);
        assert_eq!(
            profiler_skip_reason(single, None, MAX_PROFILED_LAUNCHES, &ms, 60.0),
            None
        );
        let why = |mode, waits, launches, samples: &[f64], left_s| {
            profiler_skip_reason(mode, waits, launches, samples, left_s).unwrap()
        };
        assert!(why(TimingMode::Batch, None, 1, &ms, 60.0).contains("batch mode"));
        assert_eq!(
            why(single, Some("reads a flag"), 1, &ms, 60.0),
            "reads a flag"
        );
        assert!(why(single, None, 65, &ms, 60.0).contains("65 launches"));
        assert!(why(single, None, 1, &[], 60.0).contains("no sample"));
        // 2 s runs: five profiled ones (about 6 s each) do not fit in 20 s, do in 40 s.
        assert!(why(single, None, 1, &[2.0; 5], 20.0).contains("time limit"));
        assert_eq!(profiler_skip_reason(single, None, 1, &[2.0; 5], 40.0), None);
    }

    #[test]
    fn timers_that_disagree_past_the_tolerance_are_flagged() {
        let settings = MeasureSettings::default();
        let mut timer = GpuTimer::new(TimerMethod::BlockedEvents, 1, true);
        // 1 µs apart on a 10 µs kernel: within the 1.5 µs allowed for the launch.
        finish_timer_record(&mut timer, &[10e-6; 5], vec![9.0e-6; 5], &settings);
        assert!(!timer.timers_disagree);
        assert!((timer.cupti_vs_events.unwrap() + 0.1).abs() < 1e-9);
        // 2 µs apart: flagged.
        finish_timer_record(&mut timer, &[10e-6; 5], vec![8.0e-6; 5], &settings);
        assert!(timer.timers_disagree);
        // On a 1 ms kernel 2% is the larger allowance: 15 µs passes, 25 µs does not.
        finish_timer_record(&mut timer, &[1e-3; 5], vec![0.985e-3; 5], &settings);
        assert!(!timer.timers_disagree);
        finish_timer_record(&mut timer, &[1e-3; 5], vec![0.975e-3; 5], &settings);
        assert!(timer.timers_disagree);
        // No CUPTI: nothing to compare, nothing flagged.
        let mut timer = GpuTimer {
            timers_disagree: false,
            cupti_vs_events: None,
            ..timer
        };
        finish_timer_record(&mut timer, &[10e-6; 5], Vec::new(), &settings);
        assert_eq!(
            (timer.cupti_vs_events, timer.timers_disagree),
            (None, false)
        );
        // The profiler judges a run of one kernel: 1.2 µs below the events' 5 µs by CUPTI's
        // activity span passes, but the profiler 2 µs below is flagged...
        timer.profiler_samples_s = vec![3.0e-6; 5];
        timer.profiler_kernels_per_run = Some(1);
        finish_timer_record(&mut timer, &[5e-6; 5], vec![3.8e-6; 5], &settings);
        assert!(timer.timers_disagree);
        assert!((timer.profiler_vs_events.unwrap() + 0.4).abs() < 1e-9);
        // ... and the profiler 0.1 µs below passes though CUPTI's span is 2 µs below.
        timer.profiler_samples_s = vec![4.9e-6; 5];
        finish_timer_record(&mut timer, &[5e-6; 5], vec![3.0e-6; 5], &settings);
        assert!(!timer.timers_disagree);
        // Runs of several kernels (their gaps are in the events, not in the profiler's sum):
        // CUPTI's span judges.
        timer.profiler_kernels_per_run = Some(3);
        finish_timer_record(&mut timer, &[5e-6; 5], vec![3.0e-6; 5], &settings);
        assert!(timer.timers_disagree);
    }
}
