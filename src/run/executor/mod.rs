//! The one way a case is measured: an `Executor` says whether a case fits where it would run and
//! measures it, on the CPU (`cpu`), on a CUDA device (`cuda`) or on the mock device (`mock`). The
//! mock runs through the same scope logic as CUDA (`cuda::Scoped`), over its own primitives, so
//! its tests exercise the launch plan, the scopes, chunking and profiling.
//!
//! Also here: the worker's GPU, opened the first time a CUDA case needs it (`GpuState`), and the
//! typed end of a case that does not reach a verdict (`CaseError`: skipped, or failed).

pub mod cpu;
pub mod cuda;
pub mod mock;

use anyhow::anyhow;

use crate::algos::{BoundCase, Buffers, CaseData};
use crate::device::{Device, KernelFile, KernelSource};
use crate::measure::Deadline;
use crate::record::{CaseStatus, DeviceFingerprint, MeasureSettings, Measurement, Variant};
use crate::stage_clock::Stage;
use crate::vocab::{Backend, Params};

use cpu::CpuExecutor;
use cuda::CudaExecutor;
use mock::{MockDevice, MockExecutor, MockSpec};

/// Why a case ended without a verdict: skipped here (the study goes on, the case is recorded as
/// skipped with the reason), or failed (recorded as an error).
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("skipped: {0}")]
    Skip(String),
    #[error(transparent)]
    Fail(anyhow::Error),
}

/// An error is a failure, unless it says the GPU cannot run the case as declared
/// (`algos::Unrunnable`): that case is skipped.
impl From<anyhow::Error> for CaseError {
    fn from(e: anyhow::Error) -> CaseError {
        match e.downcast_ref::<crate::algos::Unrunnable>() {
            Some(why) => CaseError::Skip(why.0.clone()),
            None => CaseError::Fail(e),
        }
    }
}

/// One case as an executor sees it: the bound case and what its variant and study say about
/// measuring it.
pub struct Job<'a> {
    pub variant: &'a Variant,
    pub params: &'a Params,
    pub bound: &'a dyn BoundCase,
    /// The algorithm's kernels (CUDA variants): the spec's file, or the case's own (a custom
    /// study's sources with the case's defines).
    pub kernel_file: &'a KernelFile,
    pub settings: &'a MeasureSettings,
}

/// A measured case: its samples (with the GPU timer's record, on a GPU) and the outputs of its
/// last run, untrimmed.
pub struct Executed {
    pub measurement: Measurement,
    pub outputs: Buffers,
    /// What the launcher reported about its own runs (`Launcher::facts`), for the case's facts.
    pub facts: Vec<(String, f64)>,
}

/// Where a case is measured.
pub trait Executor {
    /// `Err(Skip(why))` where the case cannot run here (too big for the device, or skipped by
    /// the mock device's file).
    fn fits(&self, job: &Job, footprint_bytes: u64) -> Result<(), CaseError>;

    /// Warms up and samples the case under the stopping rule; the time limit runs from
    /// `deadline`'s start, which is before any compile.
    fn measure(
        &mut self,
        job: &Job,
        data: &CaseData,
        deadline: Deadline,
    ) -> Result<Executed, CaseError>;

    /// Runs the job's kernel once on the case's inputs, untimed, and returns its outputs: the
    /// reference a custom study's trusted kernel gives the others. Only GPUs run kernels.
    fn run_once(&mut self, _job: &Job, _data: &CaseData) -> Result<Buffers, CaseError> {
        Err(CaseError::Fail(anyhow!(
            "kbench bug: a reference kernel can run only on a GPU"
        )))
    }

    /// The GPU this executor runs on, whose peaks a case's GB/s is judged against; None on the
    /// CPU.
    fn device(&self) -> Option<&DeviceFingerprint> {
        None
    }
}

/// The executor for a case of `backend`, opening the GPU if this is the first CUDA case; a GPU
/// that cannot be opened skips the case, with the reason.
pub fn executor_for(
    backend: Backend,
    gpu: &mut GpuState,
) -> Result<Box<dyn Executor + '_>, CaseError> {
    if backend == Backend::Cpu {
        return Ok(Box::new(CpuExecutor));
    }
    crate::stage_clock::time(Stage::Setup, || gpu.open());
    match gpu {
        GpuState::Open(device) => Ok(Box::new(CudaExecutor::new(device))),
        GpuState::Mock(mock) => Ok(Box::new(MockExecutor::new(mock))),
        GpuState::Unavailable(reason) => Err(CaseError::Skip(reason.clone())),
        GpuState::NotOpened(_) | GpuState::MockNotOpened(_) => Err(CaseError::Fail(anyhow!(
            "kbench bug: the GPU was not opened before its first case"
        ))),
    }
}

/// A worker's GPU, opened the first time a CUDA case needs it: a real one, or the mock device
/// (`mock`) where KBENCH_MOCK_GPU names one.
pub enum GpuState {
    NotOpened(KernelSource),
    MockNotOpened(Box<MockSpec>),
    Open(Box<Device>),
    Mock(Box<MockDevice>),
    Unavailable(String),
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

    /// Opens the GPU if it is not yet open (or known to be unavailable).
    fn open(&mut self) {
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
            GpuState::Open(_) | GpuState::Mock(_) | GpuState::Unavailable(_) => {}
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
