//! The CPU executor: a case's CPU implementation, resolved once, timed by the wall clock around
//! each run (the outputs reset before the clock starts).

use std::time::Instant;

use super::{CaseError, Executed, Executor, Job};
use crate::algos::CaseData;
use crate::measure::{self, Deadline, Taken};

/// Runs CPU variants in the worker's own thread.
pub struct CpuExecutor;

impl Executor for CpuExecutor {
    /// The host's memory is checked for every case (the data is prepared there whatever the
    /// backend); nothing else limits a CPU case.
    fn fits(&self, _job: &Job, _footprint_bytes: u64) -> Result<(), CaseError> {
        Ok(())
    }

    fn measure(
        &mut self,
        job: &Job,
        data: &CaseData,
        deadline: Deadline,
    ) -> Result<Executed, CaseError> {
        let mut run = job.bound.cpu(&job.variant.implementation)?;
        let mut outputs = data.output_buffers();
        let measured = measure::measure(job.settings, deadline, || {
            data.reset_outputs(&mut outputs);
            let start = Instant::now();
            run(&data.inputs, &mut outputs)?;
            Ok(Taken::clean(start.elapsed().as_secs_f64()))
        })?;
        Ok(Executed {
            measurement: measured.measurement,
            outputs,
            facts: Vec::new(),
        })
    }
}
