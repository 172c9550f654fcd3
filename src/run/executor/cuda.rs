//! The CUDA executor and the scope logic every GPU case goes through, on a real device or the mock:
//! what one sample queues in each scope (kernel; transfers from pageable or pinned memory, over
//! one stream or chunk by chunk over several; the whole program), how kernel-scope samples are
//! planned (single or batch, see `device::timer`), the profiled runs and the energy window after
//! the samples, and the GPU timer's record (clocks, energy, the other timers' verdict).
//!
//! The logic is written once (`Scoped`), over `Primitives`: the few things it asks of a device.
//! `Cuda` implements them over `device::Device` and the algorithm's launcher; the mock device
//! implements them over host memory and a time model (`super::mock`).

use anyhow::{bail, Result};

use super::{CaseError, Executed, Executor, Job};
use crate::algos::{BoundCase, Buffers, CaseData};
use crate::device::cupti_profiler::MAX_PROFILED_LAUNCHES;
use crate::device::nvml::{ClockReading, EnergyReading};
use crate::device::timer::{batch_runs, Sample, SamplePlan, PROFILED_RUNS};
use crate::device::{
    CaptureFailed, Device, DeviceBuf, DeviceIo, Gpu, Launcher, PinnedBuf, Stream, CHUNK_ALIGN,
};
use crate::measure::{self, Deadline, Measured, Taken};
use crate::record::{
    ClockRecord, DeviceFingerprint, EnergyRecord, GpuTimer, MeasureSettings, TimerMethod,
};
use crate::stage_clock::{self, Stage};
use crate::stats;
use crate::vocab::{CacheMode, DType, HostData, HostMemory, Launch, Scope, TimingMode};

/// A range of elements, (first, count): a chunk of a case's arrays.
pub type Chunk = (usize, usize);

/// What the scope logic asks of a device: buffers and copies, streams, the case's launcher, a
/// kernel sample as a `SamplePlan` says, a timed region, and profiled runs. All of it queues on
/// the device's one stream unless a `Stream` is given.
pub trait Primitives {
    /// A buffer on the device.
    type Buf;
    /// Page-locked host memory holding a copy of a host array.
    type Pinned;
    /// A stream beside the device's own.
    type Stream;

    /// A zeroed buffer of `len` elements.
    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buf>;
    /// Copies `host` (pageable) into the buffer's first elements.
    fn copy_in(&self, dst: &Self::Buf, host: &HostData) -> Result<()>;
    /// Copies the buffer's first `host.len()` elements into `host` (waits for the copy).
    fn copy_out(&self, src: &Self::Buf, host: &mut HostData) -> Result<()>;
    /// Poisons the outputs, or copies in their input where computed in place.
    fn reset_outputs(&self, io: &DeviceIo<Self::Buf>) -> Result<()>;

    /// Page-locked memory holding a copy of `host`.
    fn pin(&self, host: &HostData) -> Result<Self::Pinned>;
    /// Copies page-locked memory back into `host` (after the device's stream has drained).
    fn unpin(&self, pinned: &Self::Pinned, host: &mut HostData) -> Result<()>;
    /// Queues a copy of `src` into `dst`: the whole, or one chunk on a stream.
    fn copy_in_pinned(
        &self,
        dst: &Self::Buf,
        src: &Self::Pinned,
        on: Option<(Chunk, &Self::Stream)>,
    ) -> Result<()>;
    /// Queues a copy of `src` into `dst`: the whole, or one chunk on a stream.
    fn copy_out_pinned(
        &self,
        src: &Self::Buf,
        dst: &Self::Pinned,
        on: Option<(Chunk, &Self::Stream)>,
    ) -> Result<()>;

    /// `count` streams beside the device's own.
    fn new_streams(&self, count: usize) -> Result<Vec<Self::Stream>>;
    /// Makes `stream` start after what the device's stream has queued so far.
    fn fork(&self, stream: &Self::Stream) -> Result<()>;
    /// Makes the device's stream wait for what `stream` has queued so far.
    fn join(&self, stream: &Self::Stream) -> Result<()>;

    /// The case's launcher over `io` (the algorithm's own, resolved once).
    fn launcher<'s>(
        &'s self,
        io: &'s DeviceIo<Self::Buf>,
    ) -> Result<Box<dyn Launcher<Self::Stream> + 's>>;
    /// `launcher`'s run captured once into a CUDA graph, as a launcher that replays it; Err:
    /// the launcher back, with why the capture failed.
    fn graph_launcher<'s>(
        &'s self,
        launcher: Box<dyn Launcher<Self::Stream> + 's>,
    ) -> Result<Box<dyn Launcher<Self::Stream> + 's>, CaptureFailed<'s, Self::Stream>>;
    /// Why the stream cannot be held on this device, if it cannot.
    fn hold_refused(&self) -> Option<&str>;
    /// One kernel-scope sample of `launcher`'s runs over `io`, as `plan` says.
    fn sample_kernel(
        &self,
        io: &DeviceIo<Self::Buf>,
        launcher: &mut dyn Launcher<Self::Stream>,
        plan: &SamplePlan,
    ) -> Result<Sample>;
    /// One sample of what `region` queues, between events (the L2 flushed first if asked).
    fn sample_region(
        &self,
        flush_l2: bool,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Sample>;

    /// Whether kernels can be traced (CUPTI's activity records, or the mock's stand-in).
    fn can_trace(&self) -> bool;
    /// Turns the tracing of kernels on or off (nothing where they cannot be traced).
    fn set_tracing(&self, on: bool) -> Result<()>;
    /// Whether the device can profile runs (CUPTI's range profiler, or the mock's stand-in).
    fn has_profiler(&self) -> bool;
    /// Whether an earlier profiled run in this process saw no kernel.
    fn profiler_is_blind(&self) -> bool;
    /// `PROFILED_RUNS` profiled runs: each run's kernel time and how many kernels it ran.
    fn profile_kernel(
        &self,
        io: &DeviceIo<Self::Buf>,
        launcher: &mut dyn Launcher<Self::Stream>,
        cold_l2: bool,
    ) -> Result<Vec<(f64, usize)>>;
    /// Whether the context is unusable for good (a kernel fault).
    fn is_broken(&self) -> bool;

    /// Whether the device can read the board's energy (NVML's counter; the mock's stand-in).
    fn has_energy_counter(&self) -> bool;
    /// The board's energy over `runs` calls of `region` back to back, the device drained
    /// before and after.
    fn energy_window(
        &self,
        runs: u32,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<EnergyReading>;
    /// Sets the persisting-L2 carve-out to 0 and resets persisting lines, before a case; Err:
    /// why it could not.
    fn reset_persisting_l2(&self) -> Result<(), String>;
}

/// Runs CUDA variants on the worker's GPU.
pub struct CudaExecutor<'a> {
    device: &'a mut Device,
}

impl<'a> CudaExecutor<'a> {
    pub fn new(device: &'a mut Device) -> CudaExecutor<'a> {
        CudaExecutor { device }
    }
}

impl Executor for CudaExecutor<'_> {
    fn fits(&self, _job: &Job, footprint_bytes: u64) -> Result<(), CaseError> {
        self.device
            .check_memory(footprint_bytes)
            .map_err(CaseError::Skip)
    }

    fn measure(
        &mut self,
        job: &Job,
        data: &CaseData,
        deadline: Deadline,
    ) -> Result<Executed, CaseError> {
        // Compiled on the case's first use, inside its time limit.
        let module = self.device.module(job.kernel_file)?;
        let device: &Device = self.device;
        let cuda = Cuda {
            device,
            gpu: device.gpu(&module),
            bound: job.bound,
            kernel: &job.variant.implementation,
        };
        Ok(Scoped::new(&cuda, job, data, deadline).run()?)
    }

    fn run_once(&mut self, job: &Job, data: &CaseData) -> Result<Buffers, CaseError> {
        let module = self.device.module(job.kernel_file)?;
        let device: &Device = self.device;
        let cuda = Cuda {
            device,
            gpu: device.gpu(&module),
            bound: job.bound,
            kernel: &job.variant.implementation,
        };
        Ok(Scoped::new(&cuda, job, data, Deadline::after(f64::INFINITY)).run_once()?)
    }

    fn device(&self) -> Option<&DeviceFingerprint> {
        Some(&self.device.fingerprint)
    }
}

/// The real device, with the case's algorithm and kernel for its launcher.
struct Cuda<'a> {
    device: &'a Device,
    gpu: Gpu<'a>,
    bound: &'a dyn BoundCase,
    kernel: &'a str,
}

impl Primitives for Cuda<'_> {
    type Buf = DeviceBuf;
    type Pinned = PinnedBuf;
    type Stream = Stream;

    fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuf> {
        // A case that asks for guard zones gets them on every buffer; its launcher checks them
        // (`Launcher::check_guards`) after the runs whose outputs are verified.
        if self.bound.guard_buffers() {
            self.device.alloc_guarded(dtype, len)
        } else {
            self.device.alloc(dtype, len)
        }
    }
    fn copy_in(&self, dst: &DeviceBuf, host: &HostData) -> Result<()> {
        dst.copy_from_host(host)
    }
    fn copy_out(&self, src: &DeviceBuf, host: &mut HostData) -> Result<()> {
        src.copy_to_host(host)
    }
    fn reset_outputs(&self, io: &DeviceIo) -> Result<()> {
        io.reset_outputs()
    }
    fn pin(&self, host: &HostData) -> Result<PinnedBuf> {
        PinnedBuf::copy_of(self.device, host)
    }
    fn unpin(&self, pinned: &PinnedBuf, host: &mut HostData) -> Result<()> {
        pinned.copy_to(host)
    }
    fn copy_in_pinned(
        &self,
        dst: &DeviceBuf,
        src: &PinnedBuf,
        on: Option<(Chunk, &Stream)>,
    ) -> Result<()> {
        match on {
            None => dst.copy_from_pinned(src),
            Some((chunk, stream)) => dst.copy_chunk_from_pinned(src, chunk, stream),
        }
    }
    fn copy_out_pinned(
        &self,
        src: &DeviceBuf,
        dst: &PinnedBuf,
        on: Option<(Chunk, &Stream)>,
    ) -> Result<()> {
        match on {
            None => src.copy_to_pinned(dst),
            Some((chunk, stream)) => src.copy_chunk_to_pinned(dst, chunk, stream),
        }
    }
    fn new_streams(&self, count: usize) -> Result<Vec<Stream>> {
        self.device.new_streams(count)
    }
    fn fork(&self, stream: &Stream) -> Result<()> {
        stream.follow(self.device)
    }
    fn join(&self, stream: &Stream) -> Result<()> {
        self.device.join(stream)
    }
    fn launcher<'s>(&'s self, io: &'s DeviceIo) -> Result<Box<dyn Launcher + 's>> {
        self.bound.cuda(self.kernel, self.gpu, io)
    }
    fn graph_launcher<'s>(
        &'s self,
        launcher: Box<dyn Launcher + 's>,
    ) -> Result<Box<dyn Launcher + 's>, CaptureFailed<'s>> {
        self.gpu.replay(launcher)
    }
    fn hold_refused(&self) -> Option<&str> {
        self.device.hold_refused()
    }
    fn sample_kernel(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        plan: &SamplePlan,
    ) -> Result<Sample> {
        self.device.sample_kernel(io, launcher, plan)
    }
    fn sample_region(
        &self,
        flush_l2: bool,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Sample> {
        self.device.sample_region(flush_l2, &mut |_| region())
    }
    fn can_trace(&self) -> bool {
        self.device.can_trace()
    }
    fn set_tracing(&self, on: bool) -> Result<()> {
        self.device.set_tracing(on)
    }
    fn has_profiler(&self) -> bool {
        self.device.has_profiler()
    }
    fn profiler_is_blind(&self) -> bool {
        self.device.profiler_is_blind()
    }
    fn profile_kernel(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        cold_l2: bool,
    ) -> Result<Vec<(f64, usize)>> {
        self.device.profile_kernel(io, launcher, cold_l2)
    }
    fn is_broken(&self) -> bool {
        self.device.is_broken()
    }
    fn has_energy_counter(&self) -> bool {
        self.device.has_energy_counter()
    }
    fn energy_window(
        &self,
        runs: u32,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<EnergyReading> {
        self.device.energy_window(runs, region)
    }
    fn reset_persisting_l2(&self) -> Result<(), String> {
        self.device
            .reset_persisting_l2()
            .map_err(|e| format!("{e:#}"))
    }
}

/// Timing one GPU case on `device`, in its variant's scope.
pub struct Scoped<'a, P: Primitives> {
    device: &'a P,
    scope: Scope,
    /// Where transfers copy from and to.
    host_memory: HostMemory,
    /// Streams the transfers' copies and kernels are split over, chunk by chunk (pinned only).
    streams: usize,
    data: &'a CaseData,
    settings: &'a MeasureSettings,
    deadline: Deadline,
}

/// What the samples of a scope leave behind besides the measurement.
struct Record<'r> {
    outputs: &'r mut Buffers,
    clocks: &'r mut Vec<ClockReading>,
    timer: &'r mut GpuTimer,
    facts: &'r mut Vec<(String, f64)>,
}

impl<'a, P: Primitives> Scoped<'a, P> {
    pub fn new(device: &'a P, job: &Job<'a>, data: &'a CaseData, deadline: Deadline) -> Self {
        Scoped {
            device,
            scope: job.variant.scope,
            host_memory: job.variant.host_memory,
            streams: job.variant.streams as usize,
            data,
            settings: job.settings,
            deadline,
        }
    }

    /// Times the case in its scope; returns the measurement with the GPU timer's record, and the
    /// outputs of the last sample.
    pub fn run(&self) -> Result<Executed> {
        let cold_l2 = self.settings.cache == CacheMode::Cold;
        let mut timer = GpuTimer::new(TimerMethod::Events, 1, cold_l2);
        // Before anything of the case runs: no earlier case's (or tool's) access-policy window
        // may keep data in L2 through this case's flushes.
        let reset = self.device.reset_persisting_l2();
        timer.persisting_l2_reset = Some(reset.is_ok());
        timer.persisting_l2_reset_error = reset.err();
        let mut clocks = Vec::new();
        let mut outputs = self.data.output_buffers();
        let mut facts = Vec::new();
        let mut record = Record {
            outputs: &mut outputs,
            clocks: &mut clocks,
            timer: &mut timer,
            facts: &mut facts,
        };
        // Kernel scope times its stages itself; in the others the copies are what is sampled.
        let measured = match (self.scope, self.host_memory) {
            (Scope::Kernel, _) => self.kernel_scope(&mut record)?,
            (Scope::Transfers, HostMemory::Pageable) => {
                stage_clock::time(Stage::Sampling, || self.pageable_transfers(&mut record))?
            }
            (Scope::Transfers, HostMemory::Pinned) => {
                stage_clock::time(Stage::Sampling, || self.pinned_transfers(&mut record))?
            }
            (Scope::Program, _) => {
                stage_clock::time(Stage::Sampling, || self.program_scope(&mut record))?
            }
        };
        timer.clocks = clock_record(&clocks);
        let Measured {
            mut measurement,
            second_timer_s,
        } = measured;
        finish_timer_record(
            &mut timer,
            &measurement.samples_s,
            second_timer_s,
            self.settings,
        );
        measurement.gpu_timer = Some(timer);
        Ok(Executed {
            measurement,
            outputs,
            facts,
        })
    }

    /// One untimed run on the case's inputs (a reference kernel's): its outputs.
    pub fn run_once(&self) -> Result<Buffers> {
        let device = self.device;
        let io = self.allocate()?;
        for (name, host) in &self.data.inputs.0 {
            device.copy_in(io.input(name)?, host)?;
        }
        device.reset_outputs(&io)?;
        let mut launcher = device.launcher(&io)?;
        launcher.launch()?;
        let mut outputs = self.data.output_buffers();
        self.download(&io, &mut outputs)?;
        launcher.check_guards()?;
        Ok(outputs)
    }

    /// The case's runs alone, on inputs copied once, as the sample plan says; then profiled.
    fn kernel_scope(&self, record: &mut Record) -> Result<Measured> {
        let device = self.device;
        let io = stage_clock::time(Stage::Transfers, || -> Result<_> {
            let mut io = self.allocate()?;
            for (name, host) in &self.data.inputs.0 {
                device.copy_in(io.input(name)?, host)?;
                if self.settings.fresh_inputs {
                    let pristine = device.alloc(host.dtype(), host.len())?;
                    device.copy_in(&pristine, host)?;
                    io.pristine.push((name, pristine));
                }
            }
            Ok(io)
        })?;
        let sampling = stage_clock::Entered::new(Stage::Sampling);
        let mut launcher = self.launched_as_asked(device.launcher(&io)?, record.timer);
        let clocks = &mut *record.clocks;
        // The plan's sizing runs and the samples untraced: CUPTI's kernel records slow a kernel
        // of many blocks (SAXPY of one element a thread at 2^28 on an H100: 1186.8 us traced,
        // 1160.6 us untraced, 1159.3 us under Nsight Compute). CUPTI times runs of its own
        // after them.
        device.set_tracing(false)?;
        let planned = self.plan(&io, &mut *launcher, record.timer);
        let measured = planned.and_then(|mut plan| {
            plan.fresh_inputs = self.settings.fresh_inputs;
            let measured = measure::measure(self.settings, self.deadline, || {
                let sample = device.sample_kernel(&io, &mut *launcher, &plan)?;
                clocks.extend(sample.clocks);
                Ok(taken(&sample))
            })?;
            Ok((plan, measured))
        });
        // The samples' own error first, where both failed.
        let resumed = device.set_tracing(true);
        let (plan, mut measured) = measured?;
        resumed?;
        drop(sampling);
        stage_clock::time(Stage::Transfers, || self.download(&io, record.outputs))?;
        let _extra_runs = stage_clock::Entered::new(Stage::ExtraRuns);
        self.traced_runs(&io, &mut *launcher, &plan, &mut measured, record.timer)?;
        // The facts' run (its own code path: durbin_schur's stamps) before the guards are read.
        record.facts.extend(launcher.facts()?);
        launcher.check_guards()?;
        self.profile(&io, &mut *launcher, &measured, record.timer)?;
        // The window's runs: the case's launches alone, hot (no flush, no reset between them);
        // the outputs judged were downloaded above.
        self.energy(&measured, record.timer, &mut || launcher.launch())?;
        record.timer.fresh_input_copies = io.refreshes.get();
        Ok(measured)
    }

    /// The case's launcher as `[measure] launch` asks: with `graph`, its run captured once into
    /// a CUDA graph that every run replays, where the launcher allows it and the capture works;
    /// otherwise the launcher itself, and the record says why it is not a graph.
    fn launched_as_asked<'s>(
        &'s self,
        launcher: Box<dyn Launcher<P::Stream> + 's>,
        timer: &mut GpuTimer,
    ) -> Box<dyn Launcher<P::Stream> + 's> {
        if self.settings.launch != Launch::Graph {
            return launcher;
        }
        if let Some(why) = launcher.waits_for_device().or(launcher.graph_refused()) {
            timer.graph_refused = Some(why.to_string());
            return launcher;
        }
        match self.device.graph_launcher(launcher) {
            Ok(replay) => {
                timer.launched_as_graph = true;
                replay
            }
            Err((launcher, e)) => {
                timer.graph_refused = Some(format!("the capture into a CUDA graph failed: {e:#}"));
                launcher
            }
        }
    }

    /// The device buffers and the launcher persist; each sample copies the inputs over from the
    /// case's own (pageable) host buffers, runs, and copies the outputs back.
    fn pageable_transfers(&self, record: &mut Record) -> Result<Measured> {
        let device = self.device;
        let io = self.allocate()?;
        let targets = self.targets(&io)?;
        let mut launcher = device.launcher(&io)?;
        let cold_l2 = record.timer.cold_l2;
        let Record {
            outputs, clocks, ..
        } = record;
        let mut run = || {
            for (host, target) in &targets {
                device.copy_in(target, host)?;
            }
            launcher.launch()?;
            self.download(&io, outputs)
        };
        let measured = measure::measure(self.settings, self.deadline, || {
            device.reset_outputs(&io)?;
            let sample = device.sample_region(cold_l2, &mut run)?;
            clocks.extend(sample.clocks);
            Ok(taken(&sample))
        })?;
        if self.energy(&measured, record.timer, &mut run)? {
            // The outputs judged are a run's from poisoned outputs, as a sample's are.
            device.reset_outputs(&io)?;
            run()?;
        }
        launcher.check_guards()?;
        Ok(measured)
    }

    /// As `pageable_transfers`, from and to page-locked copies of the host buffers; with
    /// `streams`, chunk by chunk over that many streams.
    fn pinned_transfers(&self, record: &mut Record) -> Result<Measured> {
        let device = self.device;
        let io = self.allocate()?;
        let targets = self.targets(&io)?;
        let mut launcher = device.launcher(&io)?;
        let pinned_in = (targets.iter())
            .map(|(host, _)| device.pin(host))
            .collect::<Result<Vec<_>>>()?;
        let pinned_out = (record.outputs.0.iter())
            .map(|(name, host)| Ok((io.output(name)?, device.pin(host)?)))
            .collect::<Result<Vec<_>>>()?;
        let copies = Copies {
            targets: &targets,
            pinned_in: &pinned_in,
            pinned_out: &pinned_out,
        };
        let (streams, chunks) = match self.streams {
            1 => (Vec::new(), Vec::new()),
            count => (device.new_streams(count)?, chunks(self.data, count)?),
        };
        let cold_l2 = record.timer.cold_l2;
        let clocks = &mut *record.clocks;
        let mut run = || {
            if streams.is_empty() {
                copies.whole(device, &mut *launcher)
            } else {
                copies.chunked(device, &mut *launcher, &streams, &chunks)
            }
        };
        let measured = measure::measure(self.settings, self.deadline, || {
            device.reset_outputs(&io)?;
            let sample = device.sample_region(cold_l2, &mut run)?;
            clocks.extend(sample.clocks);
            Ok(taken(&sample))
        })?;
        if self.energy(&measured, record.timer, &mut run)? {
            // The outputs judged are a run's from poisoned outputs, as a sample's are.
            device.reset_outputs(&io)?;
            run()?;
        }
        for ((_, host), (_, pinned)) in record.outputs.0.iter_mut().zip(&pinned_out) {
            device.unpin(pinned, host)?;
        }
        launcher.check_guards()?;
        Ok(measured)
    }

    /// Allocation, copies, the launcher's own setup, kernels, copy back and free, all inside the
    /// window: the seed's whole program. Guard zones are not checked here: the buffers are freed
    /// inside the timed window, and reading the zones there would be timed too.
    fn program_scope(&self, record: &mut Record) -> Result<Measured> {
        let device = self.device;
        let cold_l2 = record.timer.cold_l2;
        let Record {
            outputs,
            clocks,
            timer,
            ..
        } = record;
        let mut run = || {
            let io = self.allocate()?;
            for (host, target) in self.targets(&io)? {
                device.copy_in(target, host)?;
            }
            let mut launcher = device.launcher(&io)?;
            launcher.launch()?;
            self.download(&io, outputs)?;
            // Freed inside the timed region, as the seed's whole program did.
            drop(launcher);
            drop(io);
            Ok(())
        };
        let measured = measure::measure(self.settings, self.deadline, || {
            let sample = device.sample_region(cold_l2, &mut run)?;
            clocks.extend(sample.clocks);
            Ok(taken(&sample))
        })?;
        // Each run allocates its buffers afresh: the last one's outputs are as a sample's.
        self.energy(&measured, timer, &mut run)?;
        Ok(measured)
    }

    /// Zeroed device buffers for the inputs, and for the outputs at their capacity.
    fn allocate(&self) -> Result<DeviceIo<P::Buf>> {
        let inputs = (self.data.inputs.0.iter())
            .map(|(name, host)| Ok((*name, self.device.alloc(host.dtype(), host.len())?)))
            .collect::<Result<_>>()?;
        let outputs = (self.data.outputs.iter())
            .map(|o| Ok((o.name, self.device.alloc(o.dtype, o.capacity)?)))
            .collect::<Result<_>>()?;
        let in_place = (self.data.outputs.iter())
            .filter_map(|o| Some((o.name, o.in_place?)))
            .collect();
        Ok(DeviceIo {
            inputs,
            outputs,
            in_place,
            pristine: Vec::new(),
            refreshes: Default::default(),
        })
    }

    /// Where each host input is copied when transfers are timed: its own buffer, or straight
    /// into the output computed in place over it (copying it into its own buffer too would
    /// move its bytes twice).
    fn targets<'io>(
        &'io self,
        io: &'io DeviceIo<P::Buf>,
    ) -> Result<Vec<(&'io HostData, &'io P::Buf)>> {
        (self.data.inputs.0.iter())
            .map(|(name, host)| {
                let target = match io.in_place.iter().find(|(_, input)| input == name) {
                    Some((output, _)) => io.output(output)?,
                    None => io.input(name)?,
                };
                Ok((host, target))
            })
            .collect()
    }

    /// Copies every output buffer back into `outputs`.
    fn download(&self, io: &DeviceIo<P::Buf>, outputs: &mut Buffers) -> Result<()> {
        for (name, host) in &mut outputs.0 {
            self.device.copy_out(io.output(name)?, host)?;
        }
        Ok(())
    }

    /// How kernel-scope samples are taken: single (held, flushed if cold) or a batch of runs
    /// sized from a few single runs.
    fn plan(
        &self,
        io: &DeviceIo<P::Buf>,
        launcher: &mut dyn Launcher<P::Stream>,
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
                    let sample = self.device.sample_kernel(io, launcher, &one)?;
                    fastest = fastest.min(sample.seconds_per_run);
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

    /// Adds the case's energy window to the record, where the device has an energy counter and
    /// `[measure] energy` is on: `run` (one run of what the samples timed) called back to back
    /// `energy_runs` times between two readings of the counter. A window that does not fit in the
    /// case's time limit is skipped, and the record says why; one that fails costs only its own
    /// record, unless the GPU faulted. Returns whether `run` was called (the outputs are then
    /// the window's last run's).
    fn energy(
        &self,
        measured: &Measured,
        timer: &mut GpuTimer,
        run: &mut dyn FnMut() -> Result<()>,
    ) -> Result<bool> {
        if !self.settings.energy || !self.device.has_energy_counter() {
            return Ok(false);
        }
        let samples_s = &measured.measurement.samples_s;
        if samples_s.is_empty() {
            timer.energy_skipped = Some("no sample was taken".to_string());
            return Ok(false);
        }
        let median_s = stats::summarize(samples_s).median_s;
        let runs = energy_runs(median_s);
        let window_s = runs as f64 * median_s;
        let left_s = self.deadline.remaining().as_secs_f64();
        // Twice the window's GPU time: the host's own work between runs is not in the median.
        if 2.0 * window_s > left_s {
            timer.energy_skipped = Some(format!(
                "an energy window of {runs} runs (about {window_s:.3} s) would not fit in the {left_s:.1} s left of the case's time limit"
            ));
            return Ok(false);
        }
        match self.device.energy_window(runs, run) {
            Ok(reading) if reading.window_s > 0.0 => {
                timer.energy = Some(EnergyRecord::of(runs, reading.energy_mj, reading.window_s));
            }
            Ok(_) => timer.energy_skipped = Some("the energy window took no time".to_string()),
            Err(e) if self.device.is_broken() => return Err(e),
            Err(e) => timer.energy_skipped = Some(format!("the energy window failed: {e:#}")),
        }
        Ok(true)
    }

    /// Kernel scope, where kernels can be traced: more samples (`traced_run_count`: at most
    /// `TRACED_RUNS`, no more than the case took, within half the time left), taken as the
    /// samples were but with CUPTI's records on. Their CUPTI spans are the case's second timer,
    /// judged against their own events (`traced_events_s`), not against the untraced samples'.
    /// Traced runs that fail cost only their own record (`traced_skipped` says why), unless the
    /// GPU faulted: then the case fails, as it would have on its next run.
    fn traced_runs(
        &self,
        io: &DeviceIo<P::Buf>,
        launcher: &mut dyn Launcher<P::Stream>,
        plan: &SamplePlan,
        measured: &mut Measured,
        timer: &mut GpuTimer,
    ) -> Result<()> {
        if !self.device.can_trace() {
            return Ok(());
        }
        let samples_s = &measured.measurement.samples_s;
        let left_s = self.deadline.remaining().as_secs_f64();
        let runs = match traced_run_count(samples_s, plan.runs, left_s) {
            Ok(runs) => runs,
            Err(why) => {
                timer.traced_skipped = Some(why);
                return Ok(());
            }
        };
        let mut events_s = Vec::with_capacity(runs);
        let mut spans_s = Vec::with_capacity(runs);
        for _ in 0..runs {
            match self.device.sample_kernel(io, launcher, plan) {
                Ok(sample) => {
                    events_s.push(sample.seconds_per_run);
                    spans_s.extend(sample.cupti_seconds_per_run);
                }
                Err(e) if self.device.is_broken() => return Err(e),
                Err(e) => {
                    timer.traced_skipped = Some(format!("the traced runs failed: {e:#}"));
                    return Ok(());
                }
            }
        }
        timer.traced_events_s = events_s;
        measured.second_timer_s = spans_s;
        Ok(())
    }

    /// Adds a few profiled runs to the record, where the device has a profiler and the case's
    /// runs can be profiled; else says why not. A profiler that fails costs only its own record
    /// (the samples stand), unless the GPU faulted: then the case fails, as it would have on its
    /// next run.
    fn profile(
        &self,
        io: &DeviceIo<P::Buf>,
        launcher: &mut dyn Launcher<P::Stream>,
        measured: &Measured,
        timer: &mut GpuTimer,
    ) -> Result<()> {
        if !self.device.has_profiler() {
            return Ok(());
        }
        if timer.launched_as_graph {
            timer.profiler_skipped = Some(
                "launched as a CUDA graph: CUPTI's range profiler sees no kernel in a graph launch, nor in the worker after one".to_string(),
            );
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
                "CUPTI's range profiler sees no kernel in this worker any more (it captured a CUDA graph, or an earlier profiled run saw none)".to_string(),
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

/// A pinned transfers sample's copies: each input's page-locked copy into its target, and each
/// output into its page-locked copy.
struct Copies<'c, P: Primitives> {
    targets: &'c [(&'c HostData, &'c P::Buf)],
    pinned_in: &'c [P::Pinned],
    pinned_out: &'c [(&'c P::Buf, P::Pinned)],
}

impl<P: Primitives> Copies<'_, P> {
    /// Copies in, one run, copies out, on the device's stream.
    fn whole(&self, device: &P, launcher: &mut dyn Launcher<P::Stream>) -> Result<()> {
        for ((_, target), pinned) in self.targets.iter().zip(self.pinned_in) {
            device.copy_in_pinned(target, pinned, None)?;
        }
        launcher.launch()?;
        for (output, pinned) in self.pinned_out {
            device.copy_out_pinned(output, pinned, None)?;
        }
        Ok(())
    }

    /// Chunk c's copies in, its kernel and its copies out go in order on stream c % streams, so
    /// one chunk's kernel and copy out overlap the next chunks' copies in (the link copies both
    /// ways at once).
    fn chunked(
        &self,
        device: &P,
        launcher: &mut dyn Launcher<P::Stream>,
        streams: &[P::Stream],
        chunks: &[Chunk],
    ) -> Result<()> {
        for stream in streams {
            device.fork(stream)?;
        }
        for (&chunk, stream) in chunks.iter().zip(streams.iter().cycle()) {
            for ((_, target), pinned) in self.targets.iter().zip(self.pinned_in) {
                device.copy_in_pinned(target, pinned, Some((chunk, stream)))?;
            }
            launcher.launch_chunk(chunk.0, chunk.1, stream)?;
            for (output, pinned) in self.pinned_out {
                device.copy_out_pinned(output, pinned, Some((chunk, stream)))?;
            }
        }
        for stream in streams {
            device.join(stream)?;
        }
        Ok(())
    }
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
pub fn chunks(data: &CaseData, streams: usize) -> Result<Vec<Chunk>> {
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
fn chunk_ranges(n: usize, pieces: usize, align: usize) -> Vec<Chunk> {
    let size = n.div_ceil(pieces.max(1)).div_ceil(align).max(1) * align;
    let mut ranges: Vec<Chunk> = (0..n)
        .step_by(size)
        .map(|first| (first, size.min(n - first)))
        .collect();
    if ranges.is_empty() {
        ranges.push((0, 0));
    }
    ranges
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

/// The most traced runs a kernel-scope case takes after its samples (`Scoped::traced_runs`).
pub const TRACED_RUNS: usize = 10;

/// What a traced sample costs besides its runs: the hold, the flush and CUPTI's flush of its
/// records.
const TRACED_SAMPLE_OVERHEAD_S: f64 = 0.005;

/// How many traced samples a kernel-scope case takes: `TRACED_RUNS`, no more than it took
/// samples (`samples_s`, seconds a run, `runs_per_sample` runs each), and as many as fit in
/// half the `left_s` seconds left of its time limit (the samples must not be lost to the second
/// timer); Err: why none.
fn traced_run_count(samples_s: &[f64], runs_per_sample: u32, left_s: f64) -> Result<usize, String> {
    if samples_s.is_empty() {
        return Err("no sample was taken".to_string());
    }
    // A traced run is slower than an untraced one by a few percent: 10% spare.
    let sample_s = 1.1 * stats::summarize(samples_s).median_s * f64::from(runs_per_sample.max(1))
        + TRACED_SAMPLE_OVERHEAD_S;
    let fit = (0.5 * left_s / sample_s).floor();
    let runs = TRACED_RUNS.min(samples_s.len()).min(fit.max(0.0) as usize);
    if runs == 0 {
        return Err(format!(
            "a traced run of about {sample_s:.3} s would not fit in half the {left_s:.1} s left of the case's time limit"
        ));
    }
    Ok(runs)
}

/// The GPU time an energy window aims at: NVML's energy counter moves every few milliseconds on
/// an H100, so a window of a hundred of them reads the energy to about a percent, at the cost of
/// 0.1 s a case.
pub const ENERGY_WINDOW_S: f64 = 0.1;

/// The most runs one energy window takes: a kernel of a microsecond or less is bound by its
/// launches, and 20,000 of them queue in well under the window.
pub const MAX_ENERGY_RUNS: u32 = 20_000;

/// Runs in an energy window for a case whose median run takes `median_s`: enough to span
/// `ENERGY_WINDOW_S`, at least one (a case slower than the window gets one more run), at most
/// `MAX_ENERGY_RUNS`.
fn energy_runs(median_s: f64) -> u32 {
    if median_s.is_nan() || median_s <= 0.0 || median_s.is_infinite() {
        return 1;
    }
    (ENERGY_WINDOW_S / median_s)
        .ceil()
        .clamp(1.0, MAX_ENERGY_RUNS as f64) as u32
}

fn taken(sample: &Sample) -> Taken {
    Taken {
        seconds: sample.seconds_per_run,
        throttled: sample.clocks.is_some_and(|c| c.throttled()),
        second_timer_s: sample.cupti_seconds_per_run,
    }
}

/// The SM clock's range over the samples and every throttle reason seen; none without readings.
fn clock_record(clocks: &[ClockReading]) -> Option<ClockRecord> {
    if clocks.is_empty() {
        return None;
    }
    let mut reasons: Vec<String> = clocks.iter().flat_map(|c| c.reason_names()).collect();
    reasons.sort();
    reasons.dedup();
    let sm_mhz: Vec<u32> = clocks.iter().map(|c| c.sm_clock_mhz).collect();
    // 0: NVML did not say.
    let memory_mhz: Vec<u32> = (clocks.iter().map(|c| c.memory_clock_mhz))
        .filter(|&mhz| mhz > 0)
        .collect();
    Some(ClockRecord {
        sm_clock_min_mhz: sm_mhz.iter().copied().min().unwrap_or(0),
        sm_clock_max_mhz: sm_mhz.iter().copied().max().unwrap_or(0),
        throttle_reasons: reasons,
        sm_clock_median_mhz: median_mhz(&sm_mhz),
        memory_clock_median_mhz: median_mhz(&memory_mhz),
        memory_clock_min_mhz: memory_mhz.iter().copied().min(),
    })
}

/// The median of clock readings (the upper of the middle two of an even count: a reading, not
/// an average of two); None for none.
pub(crate) fn median_mhz(readings: &[u32]) -> Option<u32> {
    let mut sorted = readings.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied()
}

/// Adds CUPTI's samples and the verdict of the other timers on the events to the record. The
/// profiler times a run of one kernel as the events do (launch processing included), so it
/// judges those; CUPTI's activity span (which starts at the first block) judges the rest.
pub(crate) fn finish_timer_record(
    timer: &mut GpuTimer,
    samples_s: &[f64],
    cupti_s: Vec<f64>,
    settings: &MeasureSettings,
) {
    timer.timers_disagree = false;
    if !samples_s.is_empty() {
        let events = stats::summarize(samples_s).median_s;
        // Kernel scope: CUPTI timed traced runs of its own, judged against their own events.
        let traced = (!timer.traced_events_s.is_empty())
            .then(|| stats::summarize(&timer.traced_events_s).median_s);
        timer.tracing_slowdown = traced.map(|traced| traced / events - 1.0);
        let traced = traced.unwrap_or(events);
        // (the other timer's median, the events' median of the same runs)
        let mut judge = None;
        if !cupti_s.is_empty() {
            let cupti = stats::summarize(&cupti_s).median_s;
            timer.cupti_vs_events = Some(cupti / traced - 1.0);
            timer.cupti_minus_events_s = Some(cupti - traced);
            judge = Some((cupti, traced));
        }
        if !timer.profiler_samples_s.is_empty() {
            let profiler = stats::summarize(&timer.profiler_samples_s).median_s;
            timer.profiler_vs_events = Some(profiler / events - 1.0);
            if timer.profiler_kernels_per_run == Some(1) {
                judge = Some((profiler, events));
            }
        }
        timer.timers_disagree = judge.is_some_and(|(other, events)| {
            let allowed = (settings.timer_tolerance * events).max(settings.timer_tolerance_s);
            (other - events).abs() > allowed
        });
    }
    timer.cupti_samples_s = cupti_s;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traced_runs_are_at_most_ten_no_more_than_the_samples_and_fit_half_the_time_left() {
        // 1 ms runs, plenty of time: ten, or as many as the samples.
        assert_eq!(traced_run_count(&[1e-3; 40], 1, 100.0), Ok(10));
        assert_eq!(traced_run_count(&[1e-3; 4], 1, 100.0), Ok(4));
        // 10 s runs with 60 s left: 30 s hold two (11 s a traced run, and its overhead).
        assert_eq!(traced_run_count(&[10.0; 12], 1, 60.0), Ok(2));
        // Batch samples of 100 runs of 0.1 s: 11 s a traced sample.
        assert_eq!(traced_run_count(&[0.1; 12], 100, 60.0), Ok(2));
        let none = traced_run_count(&[10.0; 12], 1, 15.0).unwrap_err();
        assert!(none.contains("would not fit"), "{none}");
        assert!(traced_run_count(&[], 1, 100.0).is_err());
    }

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
    fn an_energy_window_spans_a_tenth_of_a_second_of_runs_within_bounds() {
        // A 5 µs kernel: 20,000 runs make 0.1 s.
        assert_eq!(energy_runs(5e-6), 20_000);
        assert_eq!(energy_runs(1e-3), 100);
        // Rounded up: 0.1 s / 3 ms is 33.3.
        assert_eq!(energy_runs(3e-3), 34);
        // A run slower than the window: one run.
        assert_eq!(energy_runs(0.5), 1);
        // A run of a microsecond or less: capped, the launches bound it.
        assert_eq!(energy_runs(1e-7), MAX_ENERGY_RUNS);
        // No time to go by: one run.
        assert_eq!(energy_runs(0.0), 1);
        assert_eq!(energy_runs(f64::NAN), 1);
        assert_eq!(energy_runs(f64::INFINITY), 1);
    }

    #[test]
    fn the_clock_record_has_the_medians_the_least_and_every_reason() {
        let reading = |sm, memory, reasons: u64| ClockReading {
            sm_clock_mhz: sm,
            sm_clock_max_mhz: 1980,
            memory_clock_mhz: memory,
            reasons,
        };
        let power_cap = nvml_wrapper::bitmasks::device::ThrottleReasons::SW_POWER_CAP.bits();
        let record = clock_record(&[
            reading(1980, 2619, 0),
            reading(1755, 2619, power_cap),
            reading(1965, 1593, 0),
            reading(1980, 0, 0),
        ])
        .unwrap();
        assert_eq!(
            (record.sm_clock_min_mhz, record.sm_clock_max_mhz),
            (1755, 1980)
        );
        assert_eq!(record.sm_clock_median_mhz, Some(1980));
        // A memory clock NVML did not give (0) is left out, not counted as 0 MHz.
        assert_eq!(record.memory_clock_median_mhz, Some(2619));
        assert_eq!(record.memory_clock_min_mhz, Some(1593));
        assert_eq!(record.throttle_reasons, vec!["sw_power_cap"]);
        assert_eq!(clock_record(&[]), None);
        assert_eq!(median_mhz(&[3, 1, 2]), Some(2));
        assert_eq!(median_mhz(&[]), None);
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
