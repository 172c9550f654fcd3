//! The GPU timer: what is queued on the stream around one sample, and in which order.
//!
//! Kernel scope, single mode (the default): the stream is held by a spin kernel while the host
//! queues the outputs' reset (poison, or the input an in-place output starts from), the L2
//! flush (cold mode, after the reset so that the outputs are not left in L2), the start event, one run's launches and
//! the stop event; then the host lets go and the GPU runs them back to back. Nothing the host does
//! (launch latency, argument building) falls between the events, and the flush and poisoning
//! stay outside them. A run of more launches than the launch queue safely holds while blocked
//! (`HOLD_LAUNCH_LIMIT`) is timed unheld, and the results say so.
//!
//! Batch mode, for kernels shorter than the events resolve (about 0.5 µs) or than a launch: the
//! held stream gets several runs back to back in one event pair, and a sample is the pair's time
//! over the runs. Caches stay hot: no flush between runs, and the results say so.
//!
//! Transfers and program scope: events around work the host queues as it goes (copies from
//! pageable memory cannot be queued behind a held stream without deadlocking it).
//!
//! After each sample, CUPTI's record of the same kernels (when there) and NVML's clocks (when
//! there) are read: the first is the second timer, the second says whether the GPU throttled.

use anyhow::{bail, Result};

use super::nvml::ClockReading;
use super::{Device, DeviceIo, KernelFile};

/// The stream hold's kernel (see `kernels/timer.cu`), compiled when a device opens.
pub const HOLD_KERNEL_FILE: KernelFile =
    KernelFile::embedded("timer.cu", include_str!("../../kernels/timer.cu"));
pub const HOLD_KERNEL: &str = "kbench_hold_stream";
/// The cold-L2 flush (a read of twice the L2's size), also in `kernels/timer.cu`.
pub const FLUSH_KERNEL: &str = "kbench_flush_l2";
/// The read-only, write-only and triad peak kernels (src/device/peaks.rs), also in
/// `kernels/timer.cu`.
pub const PEAK_READ_KERNEL: &str = "kbench_peak_read";
pub const PEAK_WRITE_KERNEL: &str = "kbench_peak_write";
pub const PEAK_TRIAD_KERNEL: &str = "kbench_peak_triad";
/// How long the hold waits for the host before it gives up (and the sample is refused).
pub const HOLD_LIMIT_NS: u64 = 2_000_000_000;
/// The most launches queued behind a held stream: well below the driver's launch queue, which
/// blocks the host when full (a deadlock against the hold, until its limit).
pub const HOLD_LAUNCH_LIMIT: usize = 256;
/// The most runs one batch sample takes.
pub const MAX_BATCH_RUNS: u32 = 10_000;
/// Runs timed by CUPTI's range profiler after a case's samples.
pub const PROFILED_RUNS: usize = 5;

/// What queues one run of a case's kernels on the device's stream. An algorithm's launcher
/// resolves its kernels, launch shapes and scratch once, when created, so that `launch` only
/// queues. `S` is the kind of stream a chunk goes on: the device's `Stream` for every algorithm;
/// the mock device (`run::executor::mock`) has its own, so that its stand-in launcher goes
/// through the same scope logic.
pub trait Launcher<S = super::Stream> {
    /// Queues one run; must not wait for the device.
    fn launch(&mut self) -> Result<()>;
    /// How many launches one run queues, so that the timer knows whether it may hold the stream.
    fn launches_per_run(&self) -> usize {
        1
    }
    /// `Some(why)` where a run waits for the device between its launches (the seed's SYMGS
    /// reads a flag back to decide whether to launch again): the stream cannot be held while
    /// it queues, so its samples are timed unheld and the results say why.
    fn waits_for_device(&self) -> Option<&'static str> {
        None
    }
    /// `Some(why)` where a run cannot be replayed from a CUDA graph captured once
    /// (`[measure] launch = "graph"`): its launches or their arguments change from run to run,
    /// or it does host work between them. The default: not known to be replayable. A launcher
    /// whose every run queues the same launches with the same arguments returns None.
    fn graph_refused(&self) -> Option<&'static str> {
        Some("this algorithm's launcher does not say that its runs can be replayed from a CUDA graph (its launches may change from run to run)")
    }
    /// Queues the run's work on elements `first .. first + count` alone, on `stream`: how a
    /// variant with `streams` overlaps its copies and kernels chunk by chunk. Only elementwise
    /// work can (each output element depends on the inputs' element of the same index); chunks
    /// start at multiples of `super::CHUNK_ALIGN` elements.
    fn launch_chunk(&mut self, _first: usize, _count: usize, _stream: &S) -> Result<()> {
        anyhow::bail!(
            "this kernel's work cannot be split into chunks over streams (it is not elementwise)"
        )
    }
    /// Waits for the device and checks the guard zones of the buffers the runs used (see
    /// `super::guard`): the error names the buffer written out of bounds. Called after the runs
    /// whose outputs are checked, outside the timing. Launchers over unguarded buffers: Ok.
    fn check_guards(&self) -> Result<()> {
        Ok(())
    }
    /// Numbers the kernel reports about its own run, from one more run outside the timing, for
    /// the case's facts (durbin_schur's per-step latency from `%globaltimer`). Default: none.
    fn facts(&mut self) -> Result<Vec<(String, f64)>> {
        Ok(Vec::new())
    }
}

/// How one kernel-scope sample is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplePlan {
    /// Hold the stream while queueing.
    pub hold: bool,
    /// Flush L2 before the start event.
    pub flush_l2: bool,
    /// Runs between the events.
    pub runs: u32,
    /// Copy the inputs over from their pristine copies first (`[measure] fresh_inputs`), before
    /// the flush, so the copy leaves nothing of theirs in L2.
    pub fresh_inputs: bool,
}

/// How long the hold waits when the device opens and checks that holding works at all.
pub const HOLD_PROBE_LIMIT_NS: u64 = 100_000_000;

impl SamplePlan {
    /// One run per sample; returns why the stream is not held, when it is not. `hold_refused`
    /// says why this device cannot hold its stream at all (see `Device::hold_refused`).
    pub fn single(
        cold_l2: bool,
        launches_per_run: usize,
        hold_refused: Option<&str>,
    ) -> (SamplePlan, Option<String>) {
        let reason = hold_refused.map(str::to_string).or_else(|| {
            (launches_per_run > HOLD_LAUNCH_LIMIT).then(|| {
                format!("a run queues {launches_per_run} launches, more than the {HOLD_LAUNCH_LIMIT} that may wait behind a held stream: host launch time is inside the window")
            })
        });
        let plan = SamplePlan {
            hold: reason.is_none(),
            flush_l2: cold_l2,
            runs: 1,
            fresh_inputs: false,
        };
        (plan, reason)
    }

    /// `runs` back to back per sample, hot, held when they fit behind the hold.
    pub fn batch(
        runs: u32,
        launches_per_run: usize,
        hold_refused: Option<&str>,
    ) -> (SamplePlan, Option<String>) {
        let (mut plan, reason) =
            SamplePlan::single(false, launches_per_run * runs as usize, hold_refused);
        plan.runs = runs;
        (plan, reason)
    }
}

/// How many runs a batch sample needs so that it spans `window_s` of GPU time, given one run's
/// time, capped so they still fit behind a held stream.
pub fn batch_runs(window_s: f64, one_run_s: f64, launches_per_run: usize) -> u32 {
    let wanted = if one_run_s > 0.0 && one_run_s.is_finite() {
        // The ratio less a rounding's worth, so that 100 µs / 1 µs asks for 100 runs, not 101.
        (window_s / one_run_s * (1.0 - 1e-12))
            .ceil()
            .clamp(1.0, MAX_BATCH_RUNS as f64) as u32
    } else {
        MAX_BATCH_RUNS
    };
    let fits = (HOLD_LAUNCH_LIMIT / launches_per_run.max(1)).max(1) as u32;
    wanted.min(fits)
}

/// The steps of a sample, in the order `take_sample` queues them; implemented over the device,
/// over the mock device (`run::executor::mock`), and over a recorder in the tests.
pub trait SampleOps {
    fn hold(&mut self) -> Result<()>;
    /// Copies the inputs over from their pristine copies (`SamplePlan::fresh_inputs`).
    fn refresh_inputs(&mut self) -> Result<()>;
    fn flush_l2(&mut self) -> Result<()>;
    fn reset_outputs(&mut self) -> Result<()>;
    fn record_start(&mut self) -> Result<()>;
    fn run(&mut self) -> Result<()>;
    fn record_stop(&mut self) -> Result<()>;
    /// Lets the stream go and waits for the stop event; false if the hold gave up first.
    fn release(&mut self) -> Result<bool>;
    /// Seconds between the events (the stop event reached).
    fn elapsed_s(&mut self) -> Result<f64>;
}

/// Takes one kernel-scope sample as `plan` says; returns seconds per run.
pub fn take_sample(ops: &mut dyn SampleOps, plan: &SamplePlan) -> Result<f64> {
    if plan.hold {
        ops.hold()?;
    }
    let queued = (|| {
        if plan.fresh_inputs {
            ops.refresh_inputs()?;
        }
        // The reset first: it writes the outputs (and reads an in-place output's input), and
        // done after the flush it left them in L2, so a cold kernel found them there. Measured
        // on an H100 against Nsight Compute, which starts each kernel with L2 invalidated:
        // saxpy_vector at n = 1,048,579 read 19% low (its in-place y was hot), and scan_lookback
        // at 16,777,219 read 5% high (the write-back of 50 MB of poisoned lines fell inside).
        ops.reset_outputs()?;
        if plan.flush_l2 {
            ops.flush_l2()?;
        }
        ops.record_start()?;
        for _ in 0..plan.runs {
            ops.run()?;
        }
        ops.record_stop()
    })();
    // Whatever happened while queueing, the stream must be let go, or it stays held.
    if plan.hold && !ops.release()? {
        bail!(
            "the stream hold gave up after {} s before the host had queued the sample (did queueing block?)",
            HOLD_LIMIT_NS as f64 * 1e-9
        );
    }
    queued?;
    Ok(ops.elapsed_s()? / plan.runs as f64)
}

/// One sample and what the other instruments said about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub seconds_per_run: f64,
    /// CUPTI's span of the sample's kernels, per run.
    pub cupti_seconds_per_run: Option<f64>,
    pub clocks: Option<ClockReading>,
}

/// The device, a case's buffers and its launcher: a kernel-scope sample's steps.
struct KernelSampler<'a> {
    device: &'a Device,
    io: &'a DeviceIo,
    launcher: &'a mut dyn Launcher,
}

impl SampleOps for KernelSampler<'_> {
    fn hold(&mut self) -> Result<()> {
        self.device.hold_stream()
    }
    fn refresh_inputs(&mut self) -> Result<()> {
        self.io.refresh_inputs()
    }
    fn flush_l2(&mut self) -> Result<()> {
        self.device.flush_l2()
    }
    fn reset_outputs(&mut self) -> Result<()> {
        self.io.reset_outputs()
    }
    fn record_start(&mut self) -> Result<()> {
        self.device.record_start()
    }
    fn run(&mut self) -> Result<()> {
        self.launcher.launch()
    }
    fn record_stop(&mut self) -> Result<()> {
        self.device.record_stop()
    }
    fn release(&mut self) -> Result<bool> {
        self.device.release_stream()
    }
    fn elapsed_s(&mut self) -> Result<f64> {
        self.device.elapsed_s()
    }
}

impl Device {
    /// One kernel-scope sample of `launcher`'s runs over `io`.
    pub fn sample_kernel(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        plan: &SamplePlan,
    ) -> Result<Sample> {
        let runs = plan.runs as f64;
        let seconds_per_run = take_sample(
            &mut KernelSampler {
                device: self,
                io,
                launcher,
            },
            plan,
        )?;
        self.after_sample(seconds_per_run, runs)
    }

    /// One sample of whatever `region` queues (transfers and program scope): the L2 flushed
    /// first if asked, then events around the region as the host queues it.
    pub fn sample_region(
        &self,
        flush_l2: bool,
        region: &mut dyn FnMut(&Device) -> Result<()>,
    ) -> Result<Sample> {
        if flush_l2 {
            self.flush_l2()?;
        }
        self.record_start()?;
        region(self)?;
        self.record_stop()?;
        let seconds = self.elapsed_s()?;
        self.after_sample(seconds, 1.0)
    }

    /// Whether CUPTI's activity records are there (else the fingerprint says why not).
    pub fn can_trace(&self) -> bool {
        self.tracer.is_some()
    }

    /// Turns CUPTI's kernel records on or off (dropping those not yet taken when off).
    pub fn set_tracing(&self, on: bool) -> Result<()> {
        match &self.tracer {
            Some(tracer) if on => tracer.resume(),
            Some(tracer) => tracer.pause(),
            None => Ok(()),
        }
        .map_err(anyhow::Error::msg)
    }

    /// Whether CUPTI's range profiler is there (else the fingerprint says why not).
    pub fn has_profiler(&self) -> bool {
        self.profiler.is_some()
    }

    /// Whether an earlier profiled run of this process saw no kernel (see `profiler_blind`).
    pub fn profiler_is_blind(&self) -> bool {
        self.profiler_blind.get()
    }

    /// `PROFILED_RUNS` runs of `launcher` under CUPTI's range profiler, the L2 flushed and the
    /// outputs reset before each, outside the profiled work: each run's summed kernel
    /// `gpu__time_duration`, and how many kernels it ran.
    pub fn profile_kernel(
        &self,
        io: &DeviceIo,
        launcher: &mut dyn Launcher,
        cold_l2: bool,
    ) -> Result<Vec<(f64, usize)>> {
        let Some(profiler) = &self.profiler else {
            bail!("this device has no profiler");
        };
        if let Some(tracer) = &self.tracer {
            tracer.pause().map_err(anyhow::Error::msg)?;
        }
        let runs = (0..PROFILED_RUNS)
            .map(|_| {
                io.refresh_inputs()?;
                io.reset_outputs()?;
                if cold_l2 {
                    self.flush_l2()?;
                }
                self.synchronize()?;
                profiler.profile(&mut || {
                    launcher.launch()?;
                    self.synchronize()
                })
            })
            .collect::<Result<Vec<_>>>();
        let resumed = match &self.tracer {
            Some(tracer) => tracer.resume().map_err(anyhow::Error::msg),
            None => Ok(()),
        };
        let runs = runs?;
        resumed?;
        if runs.iter().any(|&(_, kernels)| kernels == 0) {
            self.profiler_blind.set(true);
        }
        Ok(runs)
    }

    fn after_sample(&self, seconds_per_run: f64, runs: f64) -> Result<Sample> {
        let cupti_seconds_per_run = match &self.tracer {
            Some(tracer) => tracer
                .take_span(&[HOLD_KERNEL, FLUSH_KERNEL])
                .map_err(anyhow::Error::msg)?
                .map(|s| s / runs),
            None => None,
        };
        let clocks = self.clocks.as_ref().and_then(|c| c.read().ok());
        Ok(Sample {
            seconds_per_run,
            cupti_seconds_per_run,
            clocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the order of the steps; `release` reports a hold that gave up when asked to.
    #[derive(Default)]
    struct Recorder {
        steps: Vec<&'static str>,
        fail_run: bool,
        hold_gave_up: bool,
    }

    impl SampleOps for Recorder {
        fn hold(&mut self) -> Result<()> {
            self.steps.push("hold");
            Ok(())
        }
        fn refresh_inputs(&mut self) -> Result<()> {
            self.steps.push("refresh");
            Ok(())
        }
        fn flush_l2(&mut self) -> Result<()> {
            self.steps.push("flush");
            Ok(())
        }
        fn reset_outputs(&mut self) -> Result<()> {
            self.steps.push("reset");
            Ok(())
        }
        fn record_start(&mut self) -> Result<()> {
            self.steps.push("start");
            Ok(())
        }
        fn run(&mut self) -> Result<()> {
            self.steps.push("run");
            if self.fail_run {
                bail!("launch failed")
            }
            Ok(())
        }
        fn record_stop(&mut self) -> Result<()> {
            self.steps.push("stop");
            Ok(())
        }
        fn release(&mut self) -> Result<bool> {
            self.steps.push("release");
            Ok(!self.hold_gave_up)
        }
        fn elapsed_s(&mut self) -> Result<f64> {
            self.steps.push("elapsed");
            Ok(8e-6)
        }
    }

    #[test]
    fn a_cold_single_sample_holds_resets_then_flushes_outside_the_events_then_releases() {
        let mut r = Recorder::default();
        let (plan, unheld) = SamplePlan::single(true, 1, None);
        assert_eq!(unheld, None);
        let s = take_sample(&mut r, &plan).unwrap();
        assert_eq!(s, 8e-6);
        assert_eq!(
            r.steps,
            ["hold", "reset", "flush", "start", "run", "stop", "release", "elapsed"]
        );
    }

    #[test]
    fn fresh_inputs_are_copied_in_behind_the_hold_before_the_flush_outside_the_events() {
        let mut r = Recorder::default();
        let (mut plan, _) = SamplePlan::single(true, 1, None);
        plan.fresh_inputs = true;
        take_sample(&mut r, &plan).unwrap();
        assert_eq!(
            r.steps,
            ["hold", "refresh", "reset", "flush", "start", "run", "stop", "release", "elapsed"]
        );
    }

    #[test]
    fn a_batch_sample_runs_back_to_back_hot_and_divides_by_the_runs() {
        let mut r = Recorder::default();
        let (plan, _) = SamplePlan::batch(4, 1, None);
        let s = take_sample(&mut r, &plan).unwrap();
        assert_eq!(s, 2e-6);
        assert_eq!(
            r.steps,
            ["hold", "reset", "start", "run", "run", "run", "run", "stop", "release", "elapsed"]
        );
    }

    #[test]
    fn too_many_launches_are_timed_unheld_and_say_why() {
        let mut r = Recorder::default();
        let (plan, unheld) = SamplePlan::single(true, HOLD_LAUNCH_LIMIT + 1, None);
        assert!(!plan.hold);
        assert!(unheld.unwrap().contains("host launch time is inside"));
        take_sample(&mut r, &plan).unwrap();
        assert_eq!(
            r.steps,
            ["reset", "flush", "start", "run", "stop", "elapsed"]
        );
    }

    #[test]
    fn a_device_that_cannot_hold_times_every_sample_unheld() {
        let why = "a profiler serializes launches";
        let (plan, unheld) = SamplePlan::single(true, 1, Some(why));
        assert!(!plan.hold);
        assert_eq!(unheld.as_deref(), Some(why));
        let (plan, _) = SamplePlan::batch(8, 1, Some(why));
        assert!(!plan.hold && plan.runs == 8);
    }

    #[test]
    fn a_failed_launch_still_releases_the_stream() {
        let mut r = Recorder {
            fail_run: true,
            ..Recorder::default()
        };
        let (plan, _) = SamplePlan::single(false, 1, None);
        let err = take_sample(&mut r, &plan).unwrap_err();
        assert!(err.to_string().contains("launch failed"));
        assert_eq!(r.steps, ["hold", "reset", "start", "run", "release"]);
    }

    #[test]
    fn a_hold_that_gave_up_refuses_the_sample() {
        let mut r = Recorder {
            hold_gave_up: true,
            ..Recorder::default()
        };
        let (plan, _) = SamplePlan::single(true, 1, None);
        let err = take_sample(&mut r, &plan).unwrap_err();
        assert!(err.to_string().contains("gave up"), "{err}");
    }

    #[test]
    fn batch_runs_fill_the_window_within_the_hold_limit() {
        // 1 µs runs and a 100 µs window: 100 runs.
        assert_eq!(batch_runs(100e-6, 1e-6, 1), 100);
        // 0.1 µs runs want 1000, but only 256 launches may wait behind the hold.
        assert_eq!(batch_runs(100e-6, 0.1e-6, 1), 256);
        // Three launches a run: 85 runs fit.
        assert_eq!(batch_runs(100e-6, 0.1e-6, 3), 85);
        // A run longer than the window: one.
        assert_eq!(batch_runs(100e-6, 1e-3, 1), 1);
        // No estimate: as many as fit.
        assert_eq!(batch_runs(100e-6, 0.0, 1), 256);
        assert_eq!(batch_runs(100e-6, 1e-6, 1000), 1);
    }
}
